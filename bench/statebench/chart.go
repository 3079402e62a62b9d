package main

import (
	"fmt"
	"image/color"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/causeway-stream/causeway/bench/benchkit"
	"github.com/causeway-stream/causeway/runtime"
)

// chart draws, per key count, the processing rate and the memory of each
// backend, and the three ways back to a ready worker.
func chart(rs []result, keys []int, path string) error {
	names := make([]string, len(keys))
	for i, n := range keys {
		names[i] = fmt.Sprintf("%dk keys", n/1000)
	}
	type series struct {
		label string
		color color.Color
		value func(int) float64
	}
	panel := func(title, ylabel string, ss []series) (*plot.Plot, error) {
		p := plot.New()
		p.Title.Text, p.Y.Label.Text = title, ylabel
		w := vg.Points(16)
		top := 0.0
		for i, s := range ss {
			var vals plotter.Values
			for _, n := range keys {
				vals = append(vals, s.value(n))
				top = max(top, s.value(n))
			}
			bars, err := plotter.NewBarChart(vals, w)
			if err != nil {
				return nil, err
			}
			bars.Color, bars.LineStyle.Width = s.color, 0
			bars.Offset = w * vg.Length(2*i-len(ss)+1) / 2
			p.Add(bars)
			p.Legend.Add(s.label, bars)
		}
		p.NominalX(names...)
		p.Legend.Top, p.Legend.Left = true, true
		p.Y.Min, p.Y.Max = 0, top*1.5
		return p, nil
	}
	blue, green, red, grey := color.RGBA{R: 0x4c, G: 0x72, B: 0xb0, A: 0xff}, color.RGBA{R: 0x55, G: 0xa8, B: 0x68, A: 0xff},
		color.RGBA{R: 0xc4, G: 0x4e, B: 0x52, A: 0xff}, color.RGBA{R: 0x60, G: 0x60, B: 0x60, A: 0xff}
	by := func(stores string, f func(result) float64) func(int) float64 {
		return func(n int) float64 { return f(find(rs, stores, n)) }
	}
	rate, err := panel("Processing", "records per second", []series{
		{"Pebble", blue, by(runtime.StoresPebble, func(r result) float64 { return r.PerSec })},
		{"in memory", green, by(runtime.StoresMemory, func(r result) float64 { return r.PerSec })},
	})
	if err != nil {
		return err
	}
	mem, err := panel("Worker memory after processing", "MiB", []series{
		{"Pebble", blue, by(runtime.StoresPebble, func(r result) float64 { return mib(r.RSS) })},
		{"in memory", green, by(runtime.StoresMemory, func(r result) float64 { return mib(r.RSS) })},
	})
	if err != nil {
		return err
	}
	back, err := panel("Back to ready (Pebble)", "seconds", []series{
		{"restart after a clean stop", blue, by(runtime.StoresPebble, func(r result) float64 { return r.Restart.Seconds() })},
		{"full restore, state dir lost", red, by(runtime.StoresPebble, func(r result) float64 { return r.FullRestore.Seconds() })},
		{"plain read of the changelog", grey, by(runtime.StoresPebble, func(r result) float64 { return r.PlainRead.Seconds() })},
	})
	if err != nil {
		return err
	}
	img := vgimg.New(vg.Points(1200), vg.Points(420))
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 1, Cols: 3, PadX: vg.Points(20), PadY: vg.Points(10), PadLeft: vg.Points(10), PadRight: vg.Points(10), PadTop: vg.Points(10), PadBottom: vg.Points(10)}
	canvases := plot.Align([][]*plot.Plot{{rate, mem, back}}, tiles, dc)
	rate.Draw(canvases[0][0])
	mem.Draw(canvases[0][1])
	back.Draw(canvases[0][2])
	return benchkit.WritePNG(img, path)
}
