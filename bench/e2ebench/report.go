//go:build cgo

package main

import (
	"encoding/json"
	"fmt"
	"image/color"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/causeway-stream/causeway/bench/benchfmt"
)

// summary is the median of every measure over the runs of one
// configuration and value size.
type summary struct {
	Config     string  `json:"config"`
	ValueBytes int     `json:"value_bytes"`
	Runs       int     `json:"runs"`
	PerSec     float64 `json:"records_per_sec"`
	P50        float64 `json:"p50_ms"`
	P99        float64 `json:"p99_ms"`
	Header     float64 `json:"header_bytes_per_record"`
	Allocs     float64 `json:"allocs_per_record"`
	Commit     float64 `json:"commit_time_share"`
	ClientCPU  float64 `json:"client_cpu_us_per_record"`
	BrokerCPU  float64 `json:"broker_cpu_us_per_record"`
	ReaderCPU  float64 `json:"reader_cpu_us_per_record"`
	// Page faults per record, pipeline's process plus broker.
	Faults float64 `json:"page_faults_per_record"`
}

// target is one ratio the project holds itself to. Value compares the
// medians; the round figures compare the two configurations within each
// round, where they ran minutes apart at most, and show how far the
// comparison moves from round to round. The interval is how far Value
// could move with other runs of the same machine (a bootstrap over the
// runs); Settled says whether all of it lies on the same side of the goal
// as Value, so that the verdict would stand.
type target struct {
	What         string  `json:"what"`
	Value        float64 `json:"value"`
	Goal         string  `json:"goal"`
	Met          bool    `json:"met"`
	Rounds       int     `json:"rounds"`
	RoundMedian  float64 `json:"round_median"`
	RoundMin     float64 `json:"round_min"`
	RoundMax     float64 `json:"round_max"`
	IntervalLow  float64 `json:"interval_low"`
	IntervalHigh float64 `json:"interval_high"`
	Settled      bool    `json:"settled"`
	// meets is the goal as a test of a value.
	meets func(float64) bool
}

// shown is the target's value as the report prints it, with the decimals
// that show which side of the goal it lies on (benchfmt.Value).
func (t target) shown() string { return benchfmt.Value(t.Value, t.meets) }

// bootstrapResamples is how many resamplings an interval is drawn from.
const bootstrapResamples = 4000

// medianInterval is the central 95% of cmp(median of a, median of b) when
// the runs of each side are drawn again, with replacement, as many as there
// were: what the comparison of medians could have come out as, given how
// much the runs scatter. The draws are seeded, so a report redrawn from the
// same results gives the same interval.
func medianInterval(a, b []float64, cmp compare, seed uint64) (lo, hi float64) {
	rng := rand.New(rand.NewPCG(seed, 0x6361757365776179))
	draw := func(xs, into []float64) float64 {
		for i := range into {
			into[i] = xs[rng.IntN(len(xs))]
		}
		return median(into)
	}
	sa, sb := make([]float64, len(a)), make([]float64, len(b))
	vals := make([]float64, bootstrapResamples)
	for i := range vals {
		vals[i] = cmp(draw(a, sa), draw(b, sb))
	}
	slices.Sort(vals)
	return vals[len(vals)*25/1000], vals[len(vals)*975/1000-1]
}

// compare is how a target sets two measures side by side.
type compare func(a, b float64) float64

func ratio(a, b float64) float64      { return a / b }
func difference(a, b float64) float64 { return a - b }

// perRound compares configuration a with b, on the measure f, within every
// round that ran both at this size, and returns the median, least and
// greatest of those comparisons and how many rounds there were.
func perRound(results []result, a, b string, size int, f func(result) float64, cmp compare) (med, lo, hi float64, n int) {
	type pair struct {
		a, b       float64
		hasA, hasB bool
	}
	rounds := map[int]*pair{}
	for _, r := range results {
		if r.ValueBytes != size || (r.Config != a && r.Config != b) {
			continue
		}
		p := rounds[r.Run]
		if p == nil {
			p = &pair{}
			rounds[r.Run] = p
		}
		if r.Config == a {
			p.a, p.hasA = f(r), true
		} else {
			p.b, p.hasB = f(r), true
		}
	}
	var xs []float64
	for _, p := range rounds {
		if p.hasA && p.hasB {
			xs = append(xs, cmp(p.a, p.b))
		}
	}
	if len(xs) == 0 {
		return 0, 0, 0, 0
	}
	return median(xs), slices.Min(xs), slices.Max(xs), len(xs)
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

func summarize(results []result) []summary {
	type key struct {
		c string
		s int
	}
	groups := map[key][]result{}
	var order []key
	for _, r := range results {
		k := key{r.Config, r.ValueBytes}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], r)
	}
	slices.SortFunc(order, func(a, b key) int {
		if a.s != b.s {
			return a.s - b.s
		}
		return slices.Index(allConfigs, a.c) - slices.Index(allConfigs, b.c)
	})
	var out []summary
	for _, k := range order {
		rs := groups[k]
		pick := func(f func(result) float64) float64 {
			xs := make([]float64, len(rs))
			for i, r := range rs {
				xs[i] = f(r)
			}
			return median(xs)
		}
		out = append(out, summary{Config: k.c, ValueBytes: k.s, Runs: len(rs),
			PerSec:    pick(func(r result) float64 { return r.RecordsPerSec }),
			P50:       pick(func(r result) float64 { return r.P50Millis }),
			P99:       pick(func(r result) float64 { return r.P99Millis }),
			Header:    pick(func(r result) float64 { return r.HeaderBytes }),
			Allocs:    pick(func(r result) float64 { return r.AllocsPerRecord }),
			Commit:    pick(func(r result) float64 { return r.CommitShare }),
			ClientCPU: pick(func(r result) float64 { return r.ClientCPUMicros }),
			BrokerCPU: pick(func(r result) float64 { return r.BrokerCPUMicros }),
			ReaderCPU: pick(func(r result) float64 { return r.ReaderCPUMicros }),
			Faults:    pick(func(r result) float64 { return r.ClientFaults + r.BrokerFaults }),
		})
	}
	return out
}

func find(ss []summary, config string, size int) (summary, bool) {
	for _, s := range ss {
		if s.Config == config && s.ValueBytes == size {
			return s, true
		}
	}
	return summary{}, false
}

// targets compares, for every value size, the configurations each target
// names: the medians of their runs, and round by round.
func targets(results []result, sizes []int) []target {
	perSec := func(r result) float64 { return r.RecordsPerSec }
	p99 := func(r result) float64 { return r.P99Millis }
	allocs := func(r result) float64 { return r.AllocsPerRecord }
	cpu := func(r result) float64 { return r.ClientCPUMicros }
	atLeast := func(bound float64) func(float64) bool { return func(v float64) bool { return v >= bound } }
	atMost := func(bound float64) func(float64) bool { return func(v float64) bool { return v <= bound } }
	specs := []struct {
		what string
		a, b string
		f    func(result) float64
		cmp  compare
		goal string
		met  func(float64) bool
	}{
		{"Causeway gate on / hand-written loop, throughput (both keep the input partition)", cfgGateOn, cfgHand, perSec, ratio, ">= 0.90", atLeast(0.90)},
		{"Causeway gate on / hand-written loop, throughput (both place by key)", cfgOnKey, cfgHandKey, perSec, ratio, ">= 0.90", atLeast(0.90)},
		{"Causeway on franz-go, gate on / franz-go GroupTransactSession, throughput (both keep the input partition)", cfgFranzOn, cfgFranz, perSec, ratio, ">= 0.90", atLeast(0.90)},
		{"Causeway on franz-go, gate on / franz-go GroupTransactSession, pipeline CPU per record", cfgFranzOn, cfgFranz, cpu, ratio, "<= 1.30", atMost(1.30)},
		{"gate on / gate off, throughput", cfgGateOn, cfgGateOff, perSec, ratio, ">= 0.95", atLeast(0.95)},
		{"gate on / gate off, p99 latency", cfgGateOn, cfgGateOff, p99, ratio, "<= 1.10", atMost(1.10)},
		{"gate on - gate off, allocations per record", cfgGateOn, cfgGateOff, allocs, difference, "<= 2", atMost(2)},
		{"three steps fused / three processors, throughput", cfgFused, cfgThree, perSec, ratio, ">= 2.5", atLeast(2.5)},
		{"three steps fused / one pass-through processor, throughput", cfgFused, cfgGateOn, perSec, ratio, ">= 0.95", atLeast(0.95)},
	}
	var out []target
	for _, size := range sizes {
		for i, sp := range specs {
			xa, xb := runsOf(results, sp.a, size, sp.f), runsOf(results, sp.b, size, sp.f)
			if len(xa) == 0 || len(xb) == 0 {
				continue
			}
			v := sp.cmp(median(xa), median(xb))
			t := target{What: fmt.Sprintf("%dB: %s", size, sp.what), Value: v, Goal: sp.goal, Met: sp.met(v), meets: sp.met}
			t.RoundMedian, t.RoundMin, t.RoundMax, t.Rounds = perRound(results, sp.a, sp.b, size, sp.f, sp.cmp)
			t.IntervalLow, t.IntervalHigh = medianInterval(xa, xb, sp.cmp, uint64(size*len(specs)+i))
			t.Settled = sp.met(t.IntervalLow) == t.Met && sp.met(t.IntervalHigh) == t.Met
			out = append(out, t)
		}
	}
	return out
}

// runsOf is f of every run of config at this size.
func runsOf(results []result, config string, size int, f func(result) float64) []float64 {
	var xs []float64
	for _, r := range results {
		if r.Config == config && r.ValueBytes == size {
			xs = append(xs, f(r))
		}
	}
	return xs
}

// replot writes the report again from an earlier result file.
func replot(o options) error {
	b, err := os.ReadFile(o.from)
	if err != nil {
		return err
	}
	var saved struct {
		Options struct {
			Records    int     `json:"records"`
			Runs       int     `json:"runs"`
			Sizes      []int   `json:"sizes"`
			Partitions int     `json:"partitions"`
			LatRecords int     `json:"latency_records"`
			LatRate    int     `json:"latency_rate"`
			Segment    int     `json:"broker_segment_bytes"`
			PageFault  float64 `json:"page_fault_us"`
			Pipeline   []int   `json:"pipeline_cpus"`
			Helpers    []int   `json:"broker_and_reader_cpus"`
		} `json:"options"`
		Runs []result `json:"runs"`
	}
	if err := json.Unmarshal(b, &saved); err != nil {
		return fmt.Errorf("%s: %w", o.from, err)
	}
	o.records, o.runs, o.sizes, o.partitions = saved.Options.Records, saved.Options.Runs, saved.Options.Sizes, saved.Options.Partitions
	o.latRecords, o.latRate = saved.Options.LatRecords, saved.Options.LatRate
	o.segmentSize, o.pageFaultUs = saved.Options.Segment, saved.Options.PageFault
	o.pipelineCPUs, o.helperCPUs = saved.Options.Pipeline, saved.Options.Helpers
	return report(o, saved.Runs)
}

func report(o options, results []result) error {
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}
	ss := summarize(results)
	ts := targets(results, o.sizes)
	js, err := json.MarshalIndent(map[string]any{"options": map[string]any{
		"records": o.records, "runs": o.runs, "sizes": o.sizes, "partitions": o.partitions,
		"latency_records": o.latRecords, "latency_rate": o.latRate,
		"broker_segment_bytes": o.segmentSize, "page_fault_us": o.pageFaultUs,
		"pipeline_cpus": o.pipelineCPUs, "broker_and_reader_cpus": o.helperCPUs},
		"runs": results, "medians": ss, "targets": ts}, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(o.out, "e2e.json"), js, 0o644); err != nil {
		return err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Medians of %d interleaved runs, %d records each, %d partitions", o.runs, o.records, o.partitions)
	if o.segmentSize > 0 { // results saved before these were recorded have neither
		fmt.Fprintf(&b, "; broker segments of %d bytes", o.segmentSize)
	}
	b.WriteString(".\n")
	if o.pageFaultUs > 0 {
		fmt.Fprintf(&b, "On this machine the first touch of a fresh memory page cost %.1f µs.\n", o.pageFaultUs)
	}
	if len(o.pipelineCPUs) > 0 {
		fmt.Fprintf(&b, "Pinned: the pipeline's process on CPUs %s, the broker and the output reader on CPUs %s.\n",
			formatCPUs(o.pipelineCPUs), formatCPUs(o.helperCPUs))
	}
	b.WriteString("\n")
	b.WriteString("| configuration | value | records/s | p50 ms | p99 ms | header B/record | allocs/record | commit time | CPU µs/record, pipeline's process | CPU µs/record, broker | CPU µs/record, output reader | page faults/record, pipeline's process and broker |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, s := range ss {
		fmt.Fprintf(&b, "| %s | %d B | %.0f | %.1f | %.1f | %.1f | %.1f | %.1f%% | %.1f | %.1f | %.1f | %.2f |\n",
			s.Config, s.ValueBytes, s.PerSec, s.P50, s.P99, s.Header, s.Allocs, 100*s.Commit, s.ClientCPU, s.BrokerCPU, s.ReaderCPU, s.Faults)
	}
	b.WriteString("\nTargets: the value compares the medians above; the 95% interval is where that value could have landed " +
		"given how the runs scatter (runs drawn again with replacement), and a verdict is settled only if all of it lies " +
		"on one side of the goal; the round columns compare the two configurations within each round.\n\n")
	b.WriteString("| target | value | goal | | 95% interval | round median | round range |\n|---|---:|---|---|---|---:|---|\n")
	for _, t := range ts {
		verdict := "met"
		if !t.Met {
			verdict = "MISSED"
		}
		if !t.Settled {
			verdict += ", not settled"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %.2f – %.2f | %.2f | %.2f – %.2f |\n",
			t.What, t.shown(), t.Goal, verdict, t.IntervalLow, t.IntervalHigh, t.RoundMedian, t.RoundMin, t.RoundMax)
	}
	if err := os.WriteFile(filepath.Join(o.out, "e2e.md"), []byte(b.String()), 0o644); err != nil {
		return err
	}
	fmt.Println()
	fmt.Print(b.String())
	return chart(ss, o.sizes, filepath.Join(o.out, "e2e.png"))
}

// chart draws throughput and p99 latency per configuration, one bar group
// per value size.
func chart(ss []summary, sizes []int, path string) error {
	var configs []string
	for _, c := range allConfigs {
		for _, s := range ss {
			if s.Config == c && !slices.Contains(configs, c) {
				configs = append(configs, c)
			}
		}
	}
	panel := func(title, ylabel string, value func(summary) float64) (*plot.Plot, error) {
		p := plot.New()
		p.Title.Text, p.Y.Label.Text = title, ylabel
		w := vg.Points(14)
		for i, c := range configs {
			var vals plotter.Values
			for _, size := range sizes {
				s, _ := find(ss, c, size)
				vals = append(vals, value(s))
			}
			bars, err := plotter.NewBarChart(vals, w)
			if err != nil {
				return nil, err
			}
			bars.Color = palette[i%len(palette)]
			bars.LineStyle.Width = 0
			bars.Offset = w * vg.Length(i-len(configs)/2)
			p.Add(bars)
			p.Legend.Add(c, bars)
		}
		var names []string
		for _, s := range sizes {
			names = append(names, fmt.Sprintf("%d-byte values", s))
		}
		p.NominalX(names...)
		p.Legend.Top, p.Legend.Left = true, true
		// Headroom above the tallest bar for the legend.
		top := 0.0
		for _, s := range ss {
			top = max(top, value(s))
		}
		p.Y.Min, p.Y.Max = 0, top*1.45
		return p, nil
	}
	tp, err := panel("Throughput", "records per second", func(s summary) float64 { return s.PerSec })
	if err != nil {
		return err
	}
	lp, err := panel("End-to-end latency, p99", "milliseconds", func(s summary) float64 { return s.P99 })
	if err != nil {
		return err
	}
	img := vgimg.New(vg.Points(1100), vg.Points(450))
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 1, Cols: 2, PadX: vg.Points(20), PadY: vg.Points(10), PadLeft: vg.Points(10), PadRight: vg.Points(10), PadTop: vg.Points(10), PadBottom: vg.Points(10)}
	canvases := plot.Align([][]*plot.Plot{{tp, lp}}, tiles, dc)
	tp.Draw(canvases[0][0])
	lp.Draw(canvases[0][1])
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	png := vgimg.PngCanvas{Canvas: img}
	if _, err := png.WriteTo(f); err != nil {
		return err
	}
	return f.Close()
}

var palette = []color.Color{
	color.RGBA{R: 0x4c, G: 0x72, B: 0xb0, A: 0xff}, color.RGBA{R: 0x55, G: 0xa8, B: 0x68, A: 0xff},
	color.RGBA{R: 0xc4, G: 0x4e, B: 0x52, A: 0xff}, color.RGBA{R: 0x81, G: 0x72, B: 0xb2, A: 0xff},
	color.RGBA{R: 0xcc, G: 0xb9, B: 0x74, A: 0xff}, color.RGBA{R: 0x64, G: 0xb5, B: 0xcd, A: 0xff},
	color.RGBA{R: 0x8c, G: 0x61, B: 0x3c, A: 0xff}, color.RGBA{R: 0xda, G: 0x8b, B: 0xc3, A: 0xff},
	color.RGBA{R: 0x40, G: 0x40, B: 0x40, A: 0xff},
}
