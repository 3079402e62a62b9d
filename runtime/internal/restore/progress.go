package restore

import (
	"time"

	"github.com/causeway-stream/causeway/causal"
)

// Progress is how far the restore of one task has come.
type Progress struct {
	// Records of its stores' changelogs applied so far, of Total to read.
	Records int64 `json:"records"`
	Total   int64 `json:"total"`
	// Bytes of keys and values applied so far.
	Bytes int64 `json:"bytes"`
	// PerSecond is the rate so far, and Remaining what it makes of the
	// rest.
	PerSecond float64       `json:"records_per_second"`
	Remaining time.Duration `json:"remaining_ns"`
}

// remaining is how long n records take at rate.
func remaining(n int64, rate float64) time.Duration {
	if rate <= 0 || n <= 0 {
		return 0
	}
	return time.Duration(float64(n) / rate * float64(time.Second))
}

// report publishes how far each task's restore has come.
func (r *Restorer) report(ids []string, targets map[causal.Channel]*storeTarget, totals map[string]int64, started time.Time) {
	elapsed := r.Now().Sub(started).Seconds()
	for _, id := range ids {
		p := Progress{Total: totals[id]}
		for _, s := range targets {
			if s.id == id {
				p.Records += s.records.Load()
				p.Bytes += s.bytes.Load()
			}
		}
		if elapsed > 0 {
			p.PerSecond = float64(p.Records) / elapsed
		}
		p.Remaining = remaining(p.Total-p.Records, p.PerSecond)
		r.Report(id, p, false)
		if p.Total > 0 {
			r.Ratio.WithLabelValues(id).Set(float64(p.Records) / float64(p.Total))
		}
	}
}
