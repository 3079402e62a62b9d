package connectworker

import (
	"strings"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/causeway-stream/causeway/connect"
	"github.com/causeway-stream/causeway/runtime/sinkworker"
)

// The worker's metrics, read from its tasks when scraped.
var (
	descTasks = prometheus.NewDesc("causeway_connect_tasks", "Tasks this worker holds, by connector and state.",
		[]string{"connector", "state"}, nil)
	descSinkRecords = prometheus.NewDesc("causeway_connect_sink_records_total",
		"Records a sink task handled since it started: written, or refused (sent to the dead-letter topic).", []string{"connector", "outcome"}, nil)
	descSinkCommits = prometheus.NewDesc("causeway_connect_sink_commits_total", "Commits of a sink task since it started.",
		[]string{"connector"}, nil)
	descSinkHeld = prometheus.NewDesc("causeway_connect_sink_held_records",
		"Records a sink task's gate holds, as of its last commit: they wait for what their clocks claim.", []string{"connector"}, nil)
	descSourceRecords = prometheus.NewDesc("causeway_connect_source_records_total",
		"Records a source task wrote to Kafka (committed) since it started.", []string{"connector"}, nil)
	descRestarts = prometheus.NewDesc("causeway_connect_task_restarts_total",
		"Restarts of FAILED tasks the restart policy made on this worker, not counting an operator's.", []string{"connector", "task"}, nil)
)

// taskCounters are what a runner's task reports to the metrics.
type taskCounters struct {
	sink     atomic.Pointer[sinkworker.Worker]
	produced atomic.Int64
	// reporter is a source task that reports gauges of its own.
	reporter atomic.Pointer[connect.Reporter]
	// describer is a source task that says where it stands.
	describer atomic.Pointer[connect.Describer]
}

// registry holds the worker's metrics and the Go runtime's and the
// process's.
func (w *Worker) registry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), collector{w: w})
	return reg
}

// collector reads the herder's runners when scraped; the server serves
// nothing before the worker runs its herder.
type collector struct{ w *Worker }

func (c collector) Describe(ch chan<- *prometheus.Desc) { prometheus.DescribeByCollect(c, ch) }

func (c collector) Collect(ch chan<- prometheus.Metric) {
	h := c.w.herder
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for name, r := range h.runners {
		ch <- prometheus.MustNewConstMetric(descTasks, prometheus.GaugeValue, 1, name, r.status().State)
		if sw := r.counters.sink.Load(); sw != nil {
			st := sw.Status()
			ch <- prometheus.MustNewConstMetric(descSinkRecords, prometheus.CounterValue, float64(st.Written), name, "written")
			ch <- prometheus.MustNewConstMetric(descSinkRecords, prometheus.CounterValue, float64(st.Rejected), name, "refused")
			ch <- prometheus.MustNewConstMetric(descSinkCommits, prometheus.CounterValue, float64(st.Commits), name)
			ch <- prometheus.MustNewConstMetric(descSinkHeld, prometheus.GaugeValue, float64(st.Held), name)
		}
		if r.kind == kindSource {
			ch <- prometheus.MustNewConstMetric(descSourceRecords, prometheus.CounterValue, float64(r.counters.produced.Load()), name)
		}
		if rep := r.counters.reporter.Load(); rep != nil {
			for gauge, v := range (*rep).Report() {
				desc := prometheus.NewDesc("causeway_connect_source_"+gauge, "What the connector's task reports (connect.Reporter).", []string{"connector"}, nil)
				ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, v, name)
			}
		}
	}
	for key, n := range h.restarted {
		name, task, _ := strings.Cut(key, "/")
		ch <- prometheus.MustNewConstMetric(descRestarts, prometheus.CounterValue, float64(n), name, task)
	}
}
