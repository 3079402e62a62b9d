// Command benchreport reads `go test -bench` output on standard input and
// prints, as a markdown table, the ratios the project's performance targets
// are stated in. Every ratio compares benchmarks from the same run, so it
// holds on a noisy machine where absolute numbers do not. With -count above
// one, each benchmark's median is used. It exits 1 when a target is missed.
package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
)

// results maps a benchmark name (without the -GOMAXPROCS suffix) and a unit
// to every value measured for it.
type results map[string]map[string][]float64

func parse(r io.Reader) (results, error) {
	res := results{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		name := f[0]
		if i := strings.LastIndexByte(name, '-'); i > 0 {
			name = name[:i]
		}
		if res[name] == nil {
			res[name] = map[string][]float64{}
		}
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				return nil, fmt.Errorf("benchmark %s: value %q: %w", name, f[i], err)
			}
			res[name][f[i+1]] = append(res[name][f[i+1]], v)
		}
	}
	return res, sc.Err()
}

// median returns the median of a benchmark's values in unit, and false when
// it was not measured.
func (r results) median(name, unit string) (float64, bool) {
	vs := slices.Clone(r[name][unit])
	if len(vs) == 0 {
		return 0, false
	}
	slices.Sort(vs)
	return vs[len(vs)/2], true
}

type target struct {
	what     string
	num, den [2]string // benchmark, unit
	atMost   float64   // the ratio must be <= atMost (or >= atLeast)
	atLeast  float64
	absolute bool // num alone, no den
}

var targets = []target{
	{what: "gate, 8-entry clock, in map lookups", num: [2]string{"BenchmarkGate/entries=8", "ns/op"}, den: [2]string{"BenchmarkMapLookup", "ns/op"}, atMost: 12},
	{what: "gate, 1-entry clock, in map lookups", num: [2]string{"BenchmarkGate/entries=1", "ns/op"}, den: [2]string{"BenchmarkMapLookup", "ns/op"}},
	{what: "gate, 64-entry clock, in map lookups", num: [2]string{"BenchmarkGate/entries=64", "ns/op"}, den: [2]string{"BenchmarkMapLookup", "ns/op"}},
	{what: "gate allocations per record, 8 entries", num: [2]string{"BenchmarkGate/entries=8", "allocs/op"}, absolute: true, atMost: 0},
	{what: "gate allocations per record, 64 entries", num: [2]string{"BenchmarkGate/entries=64", "allocs/op"}, absolute: true, atMost: 0},
	{what: "ranking deliverable records by timestamp / first come, 8 entries", num: [2]string{"BenchmarkGatePreferred/entries=8", "ns/op"}, den: [2]string{"BenchmarkGate/entries=8", "ns/op"}, atMost: 1.1},
	{what: "gate allocations per record, ranked, 8 entries", num: [2]string{"BenchmarkGatePreferred/entries=8", "allocs/op"}, absolute: true, atMost: 0},
	{what: "10,000 held heads / none, 1 entry", num: [2]string{"BenchmarkGateHeld/entries=1", "ns/op"}, den: [2]string{"BenchmarkGate/entries=1", "ns/op"}, atMost: 1.2},
	{what: "10,000 held heads / none, 8 entries", num: [2]string{"BenchmarkGateHeld/entries=8", "ns/op"}, den: [2]string{"BenchmarkGate/entries=8", "ns/op"}, atMost: 1.2},
	{what: "10,000 held heads / none, 64 entries", num: [2]string{"BenchmarkGateHeld/entries=64", "ns/op"}, den: [2]string{"BenchmarkGate/entries=64", "ns/op"}, atMost: 1.2},
	{what: "header bytes per entry, 8 entries", num: [2]string{"BenchmarkEncode/entries=8", "bytes/entry"}, absolute: true, atMost: 4},
	{what: "header bytes per entry, 64 entries", num: [2]string{"BenchmarkEncode/entries=64", "bytes/entry"}, absolute: true, atMost: 4},
	{what: "JSON size / header size, 8 entries", num: [2]string{"BenchmarkJSONEncode/entries=8", "bytes/clock"}, den: [2]string{"BenchmarkEncode/entries=8", "bytes/clock"}, atLeast: 5},
	{what: "JSON size / header size, 64 entries", num: [2]string{"BenchmarkJSONEncode/entries=64", "bytes/clock"}, den: [2]string{"BenchmarkEncode/entries=64", "bytes/clock"}, atLeast: 5},
	{what: "JSON encode time / header encode time, 8 entries", num: [2]string{"BenchmarkJSONEncode/entries=8", "ns/op"}, den: [2]string{"BenchmarkEncode/entries=8", "ns/op"}},
	{what: "JSON decode time / header decode time, 8 entries", num: [2]string{"BenchmarkJSONDecode/entries=8", "ns/op"}, den: [2]string{"BenchmarkDecode/entries=8", "ns/op"}},
	{what: "JSON decode time / header decode time, 64 entries", num: [2]string{"BenchmarkJSONDecode/entries=64", "ns/op"}, den: [2]string{"BenchmarkDecode/entries=64", "ns/op"}},
}

func report(w io.Writer, r results) (missed int) {
	fmt.Fprintln(w, "| measure | value | target | |")
	fmt.Fprintln(w, "|---|---:|---|---|")
	for _, t := range targets {
		v, ok := r.median(t.num[0], t.num[1])
		if ok && !t.absolute {
			d, dok := r.median(t.den[0], t.den[1])
			ok = dok && d != 0
			if ok {
				v /= d
			}
		}
		if !ok {
			fmt.Fprintf(w, "| %s | not measured | | MISS |\n", t.what)
			missed++
			continue
		}
		goal, verdict := "", ""
		switch {
		case t.atLeast > 0:
			goal, verdict = fmt.Sprintf(">= %g", t.atLeast), pass(v >= t.atLeast)
		case t.atMost > 0 || t.absolute:
			goal, verdict = fmt.Sprintf("<= %g", t.atMost), pass(v <= t.atMost)
		}
		if verdict == "MISS" {
			missed++
		}
		fmt.Fprintf(w, "| %s | %.2f | %s | %s |\n", t.what, v, goal, verdict)
	}
	return missed
}

func pass(ok bool) string {
	if ok {
		return "ok"
	}
	return "MISS"
}

func main() {
	r, err := parse(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchreport:", err)
		os.Exit(2)
	}
	if missed := report(os.Stdout, r); missed > 0 {
		fmt.Fprintf(os.Stderr, "benchreport: %d target(s) missed\n", missed)
		os.Exit(1)
	}
}
