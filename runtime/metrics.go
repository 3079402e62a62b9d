package runtime

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Metrics are the worker's Prometheus metrics, on a registry of their own.
type Metrics struct {
	Registry *prometheus.Registry

	RecordsIn       *prometheus.CounterVec   // by topic
	RecordsOut      *prometheus.CounterVec   // by topic
	Deliveries      *prometheus.CounterVec   // by task
	Held            *prometheus.GaugeVec     // by task and channel
	GateWait        prometheus.Histogram     // receive to delivery, of records that waited
	Dropped         *prometheus.CounterVec   // by task and reason
	Commits         prometheus.Counter       // committed transactions
	Aborts          prometheus.Counter       // aborted transactions
	CommitSeconds   prometheus.Histogram     // BeginTransaction to committed
	RestoreRecords  *prometheus.CounterVec   // changelog records restored, by task
	RestoreProgress *prometheus.GaugeVec     // 0..1, by task
	StandbyRecords  *prometheus.CounterVec   // changelog records applied to standby and warm-up copies, by task
	StandbyLag      *prometheus.GaugeVec     // records a copy lacked when its last round began, by task
	TaskState       *prometheus.GaugeVec     // 1 for the task's current state
	FailedCommits   *prometheus.GaugeVec     // transactions failed in a row, by stream thread
	CommittedLag    *prometheus.GaugeVec     // high watermark less committed position, by task and channel
	DeliveredLag    *prometheus.GaugeVec     // high watermark less delivered position, by task and channel
	Latency         *prometheus.HistogramVec // record timestamp to output, by processor
	TaskRestarts    *prometheus.CounterVec   // restarts the restart policy made, by task
	NextRestart     *prometheus.GaugeVec     // when the policy restarts a failed task next (Unix seconds), by task
}

// NewMetrics registers the worker's metrics (and Go and process collectors)
// on a new registry.
func NewMetrics() *Metrics {
	r := prometheus.NewRegistry()
	m := &Metrics{
		Registry:   r,
		RecordsIn:  prometheus.NewCounterVec(prometheus.CounterOpts{Name: "causeway_records_in_total", Help: "Records read from input topics."}, []string{"topic"}),
		RecordsOut: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "causeway_records_out_total", Help: "Records committed to output topics."}, []string{"topic"}),
		Deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "causeway_deliveries_total", Help: "Records the gate delivered to processors."}, []string{"task"}),
		Held:       prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "causeway_held_records", Help: "Records held by the gate, waiting for their causes."}, []string{"task", "channel"}),
		GateWait: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "causeway_gate_wait_seconds", Help: "Time from receiving a record to delivering it, for records the gate held past the poll that brought them (the others are only in causeway_deliveries_total).",
			Buckets: prometheus.ExponentialBuckets(0.0001, 4, 10)}),
		Dropped: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "causeway_dropped_records_total", Help: "Records dropped on purpose (bad input, late, unmatched)."}, []string{"task", "reason"}),
		Commits: prometheus.NewCounter(prometheus.CounterOpts{Name: "causeway_transaction_commits_total", Help: "Committed transactions."}),
		Aborts:  prometheus.NewCounter(prometheus.CounterOpts{Name: "causeway_transaction_aborts_total", Help: "Aborted transactions."}),
		CommitSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "causeway_transaction_commit_seconds", Help: "Duration of a commit: from closing the interval (store changes, checkpoints, offsets) to committed.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 12)}),
		RestoreRecords:  prometheus.NewCounterVec(prometheus.CounterOpts{Name: "causeway_restore_records_total", Help: "Store changelog records applied while restoring."}, []string{"task"}),
		RestoreProgress: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "causeway_restore_progress_ratio", Help: "Share of the changelog read while restoring a task."}, []string{"task"}),
		StandbyRecords:  prometheus.NewCounterVec(prometheus.CounterOpts{Name: "causeway_standby_records_total", Help: "Store changelog records applied to this worker's standby and warm-up copies of other workers' tasks."}, []string{"task"}),
		StandbyLag: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "causeway_standby_lag_records", Help: "Changelog records a standby or warm-up copy of a task's stores lacked when its last catch-up round began: about what a failover to this worker would restore."},
			[]string{"task"}),
		TaskState: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "causeway_task_state", Help: "1 for the state each task is in."}, []string{"task", "state"}),
		FailedCommits: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "causeway_transaction_failures_in_a_row", Help: "Transactions of a stream thread that failed in a row (0 after a commit); at 3 the worker reports itself not ready."},
			[]string{"thread"}),
		CommittedLag: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "causeway_committed_lag_records", Help: "Offsets of a task's input channel past what the task has committed: the channel's end (high watermark) as the consumer last saw it, less the committed position. What a restart would read again, and the lag an outside monitor of the group sees."},
			[]string{"task", "channel"}),
		DeliveredLag: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "causeway_delivered_lag_records", Help: "Offsets of a task's input channel not delivered to its processor yet: the channel's end as the consumer last saw it, less the gate's frontier. It grows when the consumer falls behind or the gate holds records; what it leaves of causeway_committed_lag_records is delivered work not committed yet."},
			[]string{"task", "channel"}),
		Latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "causeway_end_to_end_latency_seconds", Help: "From an output record's timestamp (its input's, unless the processor set another) to the moment the worker hands it to the producer, in the transaction that commits it; by processor. Event-time outputs (windows) measure from their window's time.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 10)}, []string{"processor"}),
		TaskRestarts: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "causeway_task_restarts_total", Help: "Restarts of FAILED tasks the restart policy made (--task-restart-backoff), not counting an operator's."}, []string{"task"}),
		NextRestart:  prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "causeway_task_next_restart_timestamp_seconds", Help: "When the restart policy restarts a FAILED task next, in Unix seconds; 0 when none is due."}, []string{"task"}),
	}
	r.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	r.MustRegister(m.own()...)
	return m
}

// own are the worker's own metrics.
func (m *Metrics) own() []prometheus.Collector {
	return []prometheus.Collector{m.RecordsIn, m.RecordsOut, m.Deliveries, m.Held, m.GateWait, m.Dropped, m.Commits,
		m.Aborts, m.CommitSeconds, m.RestoreRecords, m.RestoreProgress, m.StandbyRecords, m.StandbyLag, m.TaskState, m.FailedCommits, m.CommittedLag,
		m.DeliveredLag, m.Latency, m.TaskRestarts, m.NextRestart}
}
