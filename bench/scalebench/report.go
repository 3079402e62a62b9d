package main

import (
	"encoding/json"
	"fmt"
	"image/color"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/causeway-stream/causeway/bench/benchkit"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// sessionTimeout is the franz consumer's session timeout: how long the
// group takes to notice a killed worker.
const sessionTimeout = 10 * time.Second

// goal is one target of the issue, checked against a result.
type goal struct {
	What, Goal, Value string
	Met               bool
}

// goals checks the results against the targets: a worker added stops no
// partition that does not move for more than a second; a worker killed
// with a standby has its partitions processed again within the session
// timeout and 2 s, restoring under 1% of the changelog.
func goals(rs []result) []goal {
	var out []goal
	for _, r := range rs {
		switch {
		case r.Scenario.Add && !r.Scenario.Eager:
			out = append(out, goal{What: r.Scenario.Name + ": longest stop of a partition that did not move", Goal: "≤ 1 s",
				Value: r.GapUnmoved.Round(time.Millisecond).String(), Met: r.GapUnmoved <= time.Second})
		case r.Scenario.Standbys > 0:
			limit := sessionTimeout + 2*time.Second
			out = append(out, goal{What: r.Scenario.Name + ": longest stop of its partitions", Goal: "≤ " + limit.String(),
				Value: r.GapMoved.Round(time.Millisecond).String(), Met: r.GapMoved <= limit})
			share := float64(r.Restored) / float64(max(r.Changelog, 1))
			out = append(out, goal{What: r.Scenario.Name + ": records restored, of the changelog", Goal: "< 1%",
				Value: fmt.Sprintf("%.3f%% (%d of %d)", 100*share, r.Restored, r.Changelog), Met: share < 0.01})
		}
	}
	return out
}

func report(o options, rs []result) error {
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d keys counted by %d workers over %d partitions (franz-go), then %d records a second for %v; the change at %v.\n\n",
		o.keys, o.workers, o.partitions, o.rate, o.window, o.event)
	b.WriteString("| scenario | partitions moved | longest stop, moved | longest stop, the others | records restored | changelog records | counting the keys took |\n|---|---|---|---|---|---|---|\n")
	for _, r := range rs {
		fmt.Fprintf(&b, "| %s | %d | %v | %v | %d | %d | %.0f s |\n", r.Scenario.Name, len(r.Moved),
			r.GapMoved.Round(time.Millisecond), r.GapUnmoved.Round(time.Millisecond), r.Restored, r.Changelog, r.BacklogSeconds)
	}
	b.WriteString("\n| target | goal | measured | met |\n|---|---|---|---|\n")
	failed := 0
	for _, g := range goals(rs) {
		met := "yes"
		if !g.Met {
			met, failed = "**no**", failed+1
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", g.What, g.Goal, g.Value, met)
	}
	fmt.Print("\n" + b.String())
	if err := os.WriteFile(filepath.Join(o.out, "scale.md"), []byte(b.String()), 0o644); err != nil {
		return err
	}
	js, err := json.MarshalIndent(rs, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(o.out, "scale.json"), js, 0o644); err != nil {
		return err
	}
	if err := chart(rs, filepath.Join(o.out, "scale.png")); err != nil {
		return err
	}
	if failed > 0 {
		return fmt.Errorf("%d targets not met", failed)
	}
	return nil
}

// chart draws, per scenario, the committed outputs a second over time, of
// the partitions that moved and of the others, with the change marked.
func chart(rs []result, path string) error {
	blue, red, grey := color.RGBA{R: 0x4c, G: 0x72, B: 0xb0, A: 0xff}, color.RGBA{R: 0xc4, G: 0x4e, B: 0x52, A: 0xff}, color.RGBA{R: 0x60, G: 0x60, B: 0x60, A: 0xff}
	var row []*plot.Plot
	for _, r := range rs {
		p := plot.New()
		p.Title.Text, p.X.Label.Text, p.Y.Label.Text = r.Scenario.Name, "seconds", "outputs per second"
		var moved, others plotter.XYs
		top := 0.0
		for _, s := range r.Series {
			x := s.At.Seconds()
			moved = append(moved, plotter.XY{X: x, Y: float64(s.Moved) * 4})
			others = append(others, plotter.XY{X: x, Y: float64(s.Unmoved) * 4})
			top = max(top, float64(max(s.Moved, s.Unmoved))*4)
		}
		for _, l := range []struct {
			label string
			xys   plotter.XYs
			c     color.Color
		}{{"partitions that did not move", others, blue}, {"partitions that moved", moved, red}} {
			line, err := plotter.NewLine(l.xys)
			if err != nil {
				return err
			}
			line.Color = l.c
			p.Add(line)
			p.Legend.Add(l.label, line)
		}
		event, err := plotter.NewLine(plotter.XYs{{X: r.EventAt.Seconds(), Y: 0}, {X: r.EventAt.Seconds(), Y: top * 1.3}})
		if err != nil {
			return err
		}
		event.Color, event.Dashes = grey, []vg.Length{vg.Points(3), vg.Points(3)}
		p.Add(event)
		p.Legend.Add("the change", event)
		p.Legend.Top = true
		p.Y.Min, p.Y.Max = 0, top*1.3
		row = append(row, p)
	}
	img := vgimg.New(vg.Points(float64(400*len(row))), vg.Points(360))
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 1, Cols: len(row), PadX: vg.Points(20), PadY: vg.Points(10), PadLeft: vg.Points(10), PadRight: vg.Points(10), PadTop: vg.Points(10), PadBottom: vg.Points(10)}
	canvases := plot.Align([][]*plot.Plot{row}, tiles, dc)
	for i, p := range row {
		p.Draw(canvases[0][i])
	}
	return benchkit.WritePNG(img, path)
}
