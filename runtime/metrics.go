package runtime

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Metrics are the worker's Prometheus metrics, on a registry of their own.
type Metrics struct {
	Registry *prometheus.Registry

	RecordsIn       *prometheus.CounterVec // by topic
	RecordsOut      *prometheus.CounterVec // by topic
	Deliveries      *prometheus.CounterVec // by task
	Held            *prometheus.GaugeVec   // by task and channel
	GateWait        prometheus.Histogram   // receive to delivery, of records that waited
	Dropped         *prometheus.CounterVec // by task and reason
	Commits         prometheus.Counter     // committed transactions
	Aborts          prometheus.Counter     // aborted transactions
	CommitSeconds   prometheus.Histogram   // BeginTransaction to committed
	RestoreRecords  *prometheus.CounterVec // changelog records restored, by task
	RestoreProgress *prometheus.GaugeVec   // 0..1, by task
	TaskState       *prometheus.GaugeVec   // 1 for the task's current state
	FailedCommits   *prometheus.GaugeVec   // transactions failed in a row, by stream thread
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
		TaskState:       prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "causeway_task_state", Help: "1 for the state each task is in."}, []string{"task", "state"}),
		FailedCommits: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "causeway_transaction_failures_in_a_row", Help: "Transactions of a stream thread that failed in a row (0 after a commit); at 3 the worker reports itself not ready."},
			[]string{"thread"}),
	}
	r.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.RecordsIn, m.RecordsOut, m.Deliveries, m.Held, m.GateWait, m.Dropped, m.Commits, m.Aborts, m.CommitSeconds,
		m.RestoreRecords, m.RestoreProgress, m.TaskState, m.FailedCommits)
	return m
}
