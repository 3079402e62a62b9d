package taskmgr

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/causeway-stream/causeway/causal"
	"github.com/causeway-stream/causeway/framework"
	"github.com/causeway-stream/causeway/framework/task"
)

// Metrics are the counters a manager keeps of its tasks' events. Their
// owner makes and registers them; the manager only adds to them.
type Metrics struct {
	// RecordsIn counts records read, by input topic (label "topic").
	RecordsIn *prometheus.CounterVec
	// Deliveries counts records the gate delivered, by task ("task").
	Deliveries *prometheus.CounterVec
	// GateWait observes how long records the gate held waited, from
	// receipt to delivery.
	GateWait prometheus.Histogram
	// Dropped counts records dropped on purpose, by task and reason
	// ("task", "reason").
	Dropped *prometheus.CounterVec
}

// unregisteredMetrics are the counters of a manager whose owner keeps
// none: nobody reads them.
func unregisteredMetrics() *Metrics {
	return &Metrics{
		RecordsIn:  prometheus.NewCounterVec(prometheus.CounterOpts{Name: "records_in"}, []string{"topic"}),
		Deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "deliveries"}, []string{"task"}),
		GateWait:   prometheus.NewHistogram(prometheus.HistogramOpts{Name: "gate_wait"}),
		Dropped:    prometheus.NewCounterVec(prometheus.CounterOpts{Name: "dropped"}, []string{"task", "reason"}),
	}
}

// inputCounter returns the counter of records read on topic.
func (m *Manager) inputCounter(topic string) prometheus.Counter {
	c, ok := m.recordsIn[topic]
	if !ok {
		c = m.cfg.Metrics.RecordsIn.WithLabelValues(topic)
		m.recordsIn[topic] = c
	}
	return c
}

// observerOf returns the observer of t's events: it logs and counts them,
// and passes them on to Config.Observer.
func (m *Manager) observerOf(t *Task) *taskObserver {
	return &taskObserver{metrics: m.cfg.Metrics, log: m.cfg.Log, also: m.cfg.Observer,
		deliveries: m.cfg.Metrics.Deliveries.WithLabelValues(t.id), dropped: map[string]float64{}}
}

// observe gives t's next instance an observer of its own: what the
// instance before it dropped and did not commit is not counted, since
// the new instance reads those records again.
func (t *Task) observe(m *Manager) task.Observer {
	t.observer = m.observerOf(t)
	return t.observer
}

// taskObserver turns one task's events into logs and metrics.
type taskObserver struct {
	metrics    *Metrics
	log        *zap.Logger
	also       task.Observer // nil when none
	deliveries prometheus.Counter
	// dropped counts, by reason, the records dropped since the task's last
	// commit. They count in Metrics.Dropped once that commit is made
	// (committed): an aborted transaction's drops happen again when the
	// rebuilt task reads the records again, and would count twice.
	dropped map[string]float64
	// nullKeys is set once the task has logged a record without a key
	// skipped: the rest are counted, and logged only at debug level, as a
	// topic of such records would otherwise flood the log.
	nullKeys bool
}

// Dropped logs a record dropped on purpose, and counts it toward the
// task's next commit.
func (o *taskObserver) Dropped(id string, ev framework.DropEvent) {
	if o.also != nil {
		o.also.Dropped(id, ev)
	}
	o.dropped[ev.Reason]++
	log := o.log.Warn
	switch {
	case ev.Reason == framework.DropNullKey && o.nullKeys:
		log = o.log.Debug
	case ev.Reason == framework.DropNullKey:
		o.nullKeys = true
		ev.Detail += " (logged once per task; causeway_dropped_records_total counts them all)"
	}
	log("record dropped", zap.String("task", id), zap.String("reason", ev.Reason),
		zap.Stringer("channel", causal.Channel{Topic: ev.Record.Topic, Partition: ev.Record.Partition}), zap.Int64("offset", ev.Record.Offset),
		zap.String("detail", ev.Detail))
}

// committed counts the drops of the transaction that just committed.
func (o *taskObserver) committed(id string) {
	for reason, n := range o.dropped {
		o.metrics.Dropped.WithLabelValues(id, reason).Add(n)
	}
	clear(o.dropped)
}

// Delivered counts every delivery and times those that waited: a record
// delivered in the poll that brought it has waited 0 by the owner's clock,
// and observing it would cost more than the rest of its bookkeeping.
func (o *taskObserver) Delivered(id string, waited time.Duration) {
	if o.also != nil {
		o.also.Delivered(id, waited)
	}
	o.deliveries.Inc()
	if waited > 0 {
		o.metrics.GateWait.Observe(waited.Seconds())
	}
}
