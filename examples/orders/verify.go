package main

import (
	"fmt"
	"sort"
	"strings"
)

// Report is what the verifier found in the committed outputs.
type Report struct {
	Anomalies  map[string]int // by anomaly word
	Duplicates int
	Losses     int
	Outputs    map[string]int // records per output topic
}

// AnomalyCount is the number of anomalies of every kind.
func (r Report) AnomalyCount() int {
	n := 0
	for _, c := range r.Anomalies {
		n += c
	}
	return n
}

// Clean reports a run with no anomaly, duplicate or loss.
func (r Report) Clean() bool { return r.AnomalyCount() == 0 && r.Duplicates == 0 && r.Losses == 0 }

// String lists the findings.
func (r Report) String() string {
	var kinds []string
	for k, n := range r.Anomalies {
		kinds = append(kinds, fmt.Sprintf("%s=%d", strings.TrimPrefix(k, "ANOMALY:"), n))
	}
	sort.Strings(kinds)
	return fmt.Sprintf("anomalies %d [%s], duplicates %d, losses %d", r.AnomalyCount(), strings.Join(kinds, " "), r.Duplicates, r.Losses)
}

// Verify checks the committed outputs (value strings per topic) against
// what the client wrote: each payment billed once, each request handled
// once, each handled request audited once, and no anomaly word anywhere.
func Verify(w Written, outputs map[string][]string) Report {
	r := Report{Anomalies: map[string]int{}, Outputs: map[string]int{}}
	expect := map[string][]string{}
	for _, o := range w.Orders {
		expect[BilledTopic] = append(expect[BilledTopic], "pay-"+o)
		expect[ShipmentsTopic] = append(expect[ShipmentsTopic], "req-"+o)
		expect[AuditTopic] = append(expect[AuditTopic], "req-"+o)
	}
	for topic, ids := range expect {
		seen := map[string]int{}
		for _, v := range outputs[topic] {
			outcome, id, _ := strings.Cut(v, " ")
			if strings.HasPrefix(outcome, "ANOMALY:") {
				r.Anomalies[outcome]++
			}
			seen[id]++
			r.Outputs[topic]++
		}
		for _, id := range ids {
			switch n := seen[id]; {
			case n == 0:
				r.Losses++
			case n > 1:
				r.Duplicates += n - 1
			}
		}
	}
	return r
}
