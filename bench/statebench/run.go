package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/causeway-stream/causeway/bench/benchfmt"
	"github.com/causeway-stream/causeway/bench/benchkit"
	"github.com/causeway-stream/causeway/runtime"
)

// result is what one backend measured at one key count.
type result struct {
	Stores string `json:"stores"`
	Keys   int    `json:"keys"`
	// PerSec is keys processed per second, from the worker's start until
	// the group committed every input offset: the median of PerSecRuns,
	// one a round (processingRounds, the backends taking turns).
	PerSec     float64   `json:"records_per_second"`
	PerSecRuns []float64 `json:"records_per_second_runs"`
	// RSS is the worker's resident memory after processing, in bytes, and
	// RestartRSS after a clean restart, once ready: the state alone, without
	// the client buffers a large backlog fills.
	RSS        int64 `json:"rss_bytes"`
	RestartRSS int64 `json:"restart_rss_bytes"`
	// Disk is the size of the state dir after processing, in bytes.
	Disk int64 `json:"disk_bytes"`
	// Restart is the time from starting the worker after a clean stop
	// until it is ready.
	Restart time.Duration `json:"restart_ns"`
	// FullRestore is the same after the state dir was deleted.
	FullRestore time.Duration `json:"full_restore_ns"`
	// PlainRead is a plain consumer reading the store's changelog topic
	// once, and Changelog how many records it read.
	PlainRead time.Duration `json:"plain_read_ns"`
	Changelog int           `json:"changelog_records"`
}

func run(o options) error {
	addr, stop, err := startBroker()
	if err != nil {
		return err
	}
	defer stop()
	fmt.Printf("broker at %s; key counts %v, %d partitions\n", addr, o.keys, o.partitions)
	tmp, err := os.MkdirTemp("", "statebench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	var results []result
	for _, n := range o.keys {
		ctx := context.Background()
		input := fmt.Sprintf("keys-%d", n)
		if _, err := adm.CreateTopic(ctx, int32(o.partitions), 1, nil, input); err != nil {
			return fmt.Errorf("create %s: %w", input, err)
		}
		began := time.Now()
		if err := benchkit.ProduceKeys(ctx, addr, input, n); err != nil {
			return fmt.Errorf("produce: %w", err)
		}
		fmt.Printf("%d keys produced in %v\n", n, time.Since(began).Round(time.Millisecond))
		var backends []string
		for _, stores := range []string{runtime.StoresPebble, runtime.StoresMemory} {
			if o.stores == "" || o.stores == stores {
				backends = append(backends, stores)
			}
		}
		measured := map[string]*result{}
		for round := range processingRounds {
			for _, stores := range backends {
				if round == 0 {
					r, err := measure(ctx, adm, addr, input, filepath.Join(tmp, fmt.Sprintf("%s-%d", stores, n)), stores, n)
					if err != nil {
						return fmt.Errorf("%s, %d keys: %w", stores, n, err)
					}
					measured[stores] = &r
					continue
				}
				// Processing again, from scratch under an application id of
				// its own, so that the processing ratio is a median too.
				app := fmt.Sprintf("count-%s-%d-round%d", stores, n, round)
				dir := filepath.Join(tmp, app)
				perSec, _, err := process(ctx, adm, addr, app, input, dir, stores, n)
				if err != nil {
					return fmt.Errorf("%s, %d keys, round %d: %w", stores, n, round, err)
				}
				_ = os.RemoveAll(dir)
				measured[stores].PerSecRuns = append(measured[stores].PerSecRuns, perSec)
			}
		}
		for _, stores := range backends {
			r := *measured[stores]
			r.PerSec = medianOf(r.PerSecRuns)
			fmt.Printf("  %-6s %8d keys  %9.0f rec/s  rss %6.0f MiB (%6.0f MiB restarted)  disk %6.0f MiB  restart %7v  full restore %7v  plain read %7v (%d records)\n",
				r.Stores, r.Keys, r.PerSec, mib(r.RSS), mib(r.RestartRSS), mib(r.Disk), r.Restart.Round(time.Millisecond), r.FullRestore.Round(time.Millisecond),
				r.PlainRead.Round(time.Millisecond), r.Changelog)
			results = append(results, r)
		}
	}
	var abortRun *aborts // the abort run's result, when there is one
	if len(o.keys) > 0 && (o.stores == "" || o.stores == runtime.StoresPebble) {
		n := o.keys[0]
		ab, err := abortsUnderLoad(context.Background(), adm, addr, fmt.Sprintf("keys-%d", n), filepath.Join(tmp, "aborts"), n)
		if err != nil {
			return fmt.Errorf("aborts under load: %w", err)
		}
		fmt.Printf("  aborts under load: %d keys, %.0f transactions aborted, %.0f changelog records restored\n", n, ab.Aborts, ab.Restored)
		abortRun = &ab
	}
	return report(o, results, abortRun)
}

// aborts is what the abort run saw: transactions aborted while the worker
// processed, and store changelog records it restored meanwhile.
type aborts struct {
	Keys     int     `json:"keys"`
	Aborts   float64 `json:"aborts"`
	Restored float64 `json:"restored_records"`
}

// abortsUnderLoad counts n keys on Pebble under an application id whose
// changelog writes the broker fails now and then, each failure aborting
// the transaction under way, and reads from the worker's metrics how many
// transactions aborted and how many changelog records it restored: the
// tasks rebuilt after an abort must read none back.
func abortsUnderLoad(ctx context.Context, adm *kadm.Client, addr, input, state string, n int) (aborts, error) {
	r := aborts{Keys: n}
	app := fmt.Sprintf("%s%d", abortApp, n)
	w, err := startWorker(addr, app, input, state, runtime.StoresPebble)
	if err != nil {
		return r, err
	}
	if err := waitProcessed(ctx, adm, w, app, input, n, time.Now()); err != nil {
		return r, err
	}
	if r.Aborts, err = benchkit.MetricSum(w.http, "causeway_transaction_aborts_total"); err == nil {
		r.Restored, err = benchkit.MetricSum(w.http, "causeway_restore_records_total")
	}
	return r, errors.Join(err, w.stop())
}

// waitProcessed waits until the group app has committed n offsets of
// input, or stops the worker after 30 minutes from began.
func waitProcessed(ctx context.Context, adm *kadm.Client, w *workerProc, app, input string, n int, began time.Time) error {
	for {
		done, err := benchkit.Committed(ctx, adm, app, input)
		if err == nil && done >= int64(n) {
			return nil
		}
		if time.Since(began) > 30*time.Minute {
			_ = w.stop()
			return fmt.Errorf("processed %d of %d keys in 30 minutes", done, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

// measure runs one backend through the phases: process, clean restart,
// full restore, and the plain read of the changelog.
func measure(ctx context.Context, adm *kadm.Client, addr, input, state, stores string, n int) (result, error) {
	r := result{Stores: stores, Keys: n}
	app := fmt.Sprintf("count-%s-%d", stores, n)
	perSec, rss, err := process(ctx, adm, addr, app, input, state, stores, n)
	if err != nil {
		return r, err
	}
	r.PerSecRuns, r.PerSec, r.RSS = []float64{perSec}, perSec, rss
	r.Disk = dirSize(state)

	// Each way back is timed repeats times, alternating, and the median
	// kept.
	var restarts, fulls, reads []time.Duration
	for range repeats {
		d, rss, err := timeToReady(addr, app, input, state, stores)
		if err != nil {
			return r, fmt.Errorf("restart: %w", err)
		}
		restarts = append(restarts, d)
		r.RestartRSS = max(r.RestartRSS, rss)
		if err := os.RemoveAll(filepath.Join(state, "tasks")); err != nil {
			return r, err
		}
		if d, _, err = timeToReady(addr, app, input, state, stores); err != nil {
			return r, fmt.Errorf("full restore: %w", err)
		}
		fulls = append(fulls, d)
		began := time.Now()
		if r.Changelog, err = readAll(ctx, addr, app+"-counts-changelog"); err != nil {
			return r, fmt.Errorf("plain read: %w", err)
		}
		reads = append(reads, time.Since(began))
	}
	r.Restart, r.FullRestore, r.PlainRead = median(restarts), median(fulls), median(reads)
	return r, nil
}

// process runs a worker of application app over the n keys of input from
// the start, and returns its keys per second and its memory once done.
func process(ctx context.Context, adm *kadm.Client, addr, app, input, state, stores string, n int) (float64, int64, error) {
	began := time.Now()
	w, err := startWorker(addr, app, input, state, stores)
	if err != nil {
		return 0, 0, err
	}
	if err := waitProcessed(ctx, adm, w, app, input, n, began); err != nil {
		return 0, 0, err
	}
	perSec := float64(n) / time.Since(began).Seconds()
	rss, err := w.rss()
	if err != nil {
		_ = w.stop()
		return 0, 0, err
	}
	if err := w.stop(); err != nil {
		return 0, 0, fmt.Errorf("stop: %w", err)
	}
	return perSec, rss, nil
}

// repeats is how many times each way back to a ready worker is timed;
// processingRounds how many times each backend processes the keys.
const (
	repeats          = 3
	processingRounds = 3
)

func medianOf(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// timeToReady starts the worker, times it until it is ready, reads its
// memory, and stops it.
func timeToReady(addr, app, input, state, stores string) (time.Duration, int64, error) {
	began := time.Now()
	w, err := startWorker(addr, app, input, state, stores)
	if err != nil {
		return 0, 0, err
	}
	if err := benchkit.WaitReady(w.http, 10*time.Minute); err != nil {
		_ = w.stop()
		return 0, 0, err
	}
	took := time.Since(began)
	rss, err := w.rss()
	return took, rss, errors.Join(err, w.stop())
}

// target is one goal of the issue's, checked against the results.
type target struct {
	What  string  `json:"what"`
	Value float64 `json:"value"`
	Goal  string  `json:"goal"`
	Met   bool    `json:"met"`
	// meets is the goal as a test of the value, where it is one; the
	// report prints the value on its side of it (benchfmt.Value).
	meets func(float64) bool
}

// check is the target what, value against goal, which meets tests.
func check(what string, value float64, goal string, meets func(float64) bool) target {
	return target{What: what, Value: value, Goal: goal, Met: meets(value), meets: meets}
}

func find(rs []result, stores string, keys int) result {
	for _, r := range rs {
		if r.Stores == stores && r.Keys == keys {
			return r
		}
	}
	return result{}
}

func targets(rs []result, keys []int, abortRun *aborts) []target {
	var ts []target
	for _, n := range keys {
		p, m := find(rs, runtime.StoresPebble, n), find(rs, runtime.StoresMemory, n)
		if m.PerSec > 0 {
			ratio := p.PerSec / m.PerSec
			ts = append(ts, check(fmt.Sprintf("%d keys: processing rate, Pebble / memory", n), ratio, ">= 0.80", func(v float64) bool { return v >= 0.8 }))
		}
		ts = append(ts, check(fmt.Sprintf("%d keys: restart after a clean stop, Pebble, seconds", n), p.Restart.Seconds(), "<= 1.0", func(v float64) bool { return v <= 1 }))
		// The restore's own work: the full restore less what a restart with
		// nothing to read takes (starting the process, joining the group).
		full := (p.FullRestore - p.Restart).Seconds() / p.PlainRead.Seconds()
		ts = append(ts, check(fmt.Sprintf("%d keys: full restore less a clean restart / plain read of the changelog, Pebble", n), full, "<= 2.0", func(v float64) bool { return v <= 2 }))
	}
	if a := abortRun; a != nil {
		ts = append(ts, target{What: fmt.Sprintf("%d keys: changelog records restored after %.0f aborts under load, Pebble", a.Keys, a.Aborts),
			Value: a.Restored, Goal: "0, after >= 1 abort", Met: a.Restored == 0 && a.Aborts >= 1})
	}
	if len(keys) >= 2 {
		lo, hi := find(rs, runtime.StoresPebble, keys[0]), find(rs, runtime.StoresPebble, keys[len(keys)-1])
		ratio := float64(hi.RSS) / float64(lo.RSS)
		ts = append(ts, check(fmt.Sprintf("worker RSS after processing, Pebble, %d keys / %d keys", keys[len(keys)-1], keys[0]), ratio, "<= 1.5", func(v float64) bool { return v <= 1.5 }))
	}
	return ts
}

// targetTable is the report's table of targets, each value printed on
// its side of its goal, and how many targets were missed.
func targetTable(ts []target) (string, int) {
	var b strings.Builder
	b.WriteString("\n| target | value | goal | |\n|---|---:|---|---|\n")
	missed := 0
	for _, t := range ts {
		verdict := "met"
		if !t.Met {
			verdict = "MISSED"
			missed++
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", t.What, benchfmt.Value(t.Value, t.meets), t.Goal, verdict)
	}
	return b.String(), missed
}

func report(o options, rs []result, abortRun *aborts) error {
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}
	ts := targets(rs, o.keys, abortRun)
	js, err := json.MarshalIndent(map[string]any{"results": rs, "aborts": abortRun, "targets": ts}, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(o.out, "state.json"), js, 0o644); err != nil {
		return err
	}
	var b strings.Builder
	b.WriteString("| stores | keys | records/s | worker RSS after processing MiB | RSS after a clean restart MiB | state dir MiB | restart after clean stop s | full restore s | plain read of the changelog s | changelog records |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range rs {
		fmt.Fprintf(&b, "| %s | %d | %.0f | %.0f | %.0f | %.0f | %.2f | %.2f | %.2f | %d |\n", r.Stores, r.Keys, r.PerSec, mib(r.RSS), mib(r.RestartRSS), mib(r.Disk),
			r.Restart.Seconds(), r.FullRestore.Seconds(), r.PlainRead.Seconds(), r.Changelog)
	}
	table, missed := targetTable(ts)
	b.WriteString(table)
	if err := os.WriteFile(filepath.Join(o.out, "state.md"), []byte(b.String()), 0o644); err != nil {
		return err
	}
	fmt.Println()
	fmt.Print(b.String())
	if err := chart(rs, o.keys, filepath.Join(o.out, "state.png")); err != nil {
		return err
	}
	if missed > 0 {
		return fmt.Errorf("%d target(s) missed", missed)
	}
	return nil
}
