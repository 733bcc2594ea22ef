package main

import (
	"bytes"
	"fmt"
	"image/color"
	"io"
	"math"
	"slices"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/hapsuper/hapsuper/test/harness"
)

// binWidth is the timeline's resolution.
const binWidth = 200 * time.Millisecond

// marker is one phase change drawn as a vertical line.
type marker struct {
	name  string
	color color.Color
	dash  bool
}

var (
	mStop      = marker{"stop (delete)", color.Black, false}
	mRules     = marker{"kube-proxy rules without the pod (per node)", color.Gray{Y: 140}, true}
	mWithdrawn = marker{"hapsuper: routing withdrawn", color.RGBA{R: 128, B: 200, A: 255}, false}
	mEnded     = marker{"drain ended", color.RGBA{B: 220, A: 255}, true}
	mSoft      = marker{"soft stop (SIGUSR1)", color.RGBA{R: 240, G: 140, A: 255}, false}
	mExit      = marker{"HAProxy exit", color.RGBA{G: 150, A: 255}, false}
	okColor    = color.RGBA{G: 110, B: 200, A: 255}
	failColor  = color.RGBA{R: 220, A: 255}
	drainColor = color.RGBA{R: 90, G: 190, B: 240, A: 255}
)

// pictureCells picks, per strategy, the cell the picture shows: the pausing
// client with the other kube-proxy frozen when there is one (where the
// strategies differ most), else the first cell of the strategy.
func pictureCells(m *matrix) []cellResult {
	var names []string
	for _, c := range m.cells {
		if !slices.Contains(names, c.strat.name) {
			names = append(names, c.strat.name)
		}
	}
	var out []cellResult
	for _, name := range names {
		cs := cellsOf(m, name)
		if failedCandidate(m, name) {
			continue // shown in the search table only
		}
		pick := cs[0]
		for _, c := range cs {
			if c.pat == patPause && c.frozen {
				pick = c
			}
		}
		out = append(out, pick)
	}
	return out
}

// failedCandidate says whether name is a sleep-N candidate that failed
// (sleep-5s, a strategy of its own, is never one).
func failedCandidate(m *matrix, name string) bool {
	for _, s := range m.search {
		if sleepFor(s.sleep).name == name && s.sleep != 5*time.Second {
			return !s.passed()
		}
	}
	return false
}

// drawTimeline writes the SVG at path and a PNG beside it.
func drawTimeline(m *matrix, path string, smoke bool) error {
	cells := pictureCells(m)
	if len(cells) == 0 {
		return fmt.Errorf("draw timeline: no rollout measured")
	}
	rows := make([][]*plot.Plot, len(cells))
	v := viewOf(cells)
	for i, c := range cells {
		p, err := cellPlot(c, v, i == 0)
		if err != nil {
			return err
		}
		rows[i] = []*plot.Plot{p}
	}
	w, h := 30*vg.Centimeter, vg.Length(len(cells))*7*vg.Centimeter+vg.Centimeter
	svg := vgsvg.New(w, h)
	drawRows(rows, draw.New(svg))
	if err := writeTo(path, svg); err != nil {
		return err
	}
	img := vgimg.New(w, h)
	dc := draw.New(img)
	dc.SetColor(color.White)
	dc.Fill(dc.Rectangle.Path())
	drawRows(rows, dc)
	return writeTo(strings.TrimSuffix(path, ".svg")+".png", vgimg.PngCanvas{Canvas: img})
}

// drawRows draws one panel per row, aligned, onto dc.
func drawRows(rows [][]*plot.Plot, dc draw.Canvas) {
	t := draw.Tiles{Rows: len(rows), Cols: 1, PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2, PadX: vg.Millimeter * 2, PadY: vg.Millimeter * 4}
	canvases := plot.Align(rows, t, dc)
	for i := range rows {
		rows[i][0].Draw(canvases[i][0])
	}
}

// writeTo renders c into path, creating its directory.
func writeTo(path string, c io.WriterTo) error {
	var b bytes.Buffer
	if _, err := c.WriteTo(&b); err != nil {
		return fmt.Errorf("render %s: %w", path, err)
	}
	return writeFile(path, b.String())
}

// view is the time window every panel shows, in seconds around each
// panel's first delete, and the requests/s axis they share.
type view struct{ from, to, ymax float64 }

// series are a panel's request rates per bin.
type series struct{ ok, failed, draining plotter.XYs }

// viewOf covers, in every cell, the first pod's drain and its rules
// withdrawal on every node, plus 1.5 s.
func viewOf(cells []cellResult) view {
	v := view{from: -1, to: 3, ymax: 10}
	for _, c := range cells {
		pod := c.pods[0]
		last := pod.master
		for _, t := range pod.nodeRules {
			if t.After(last) {
				last = t
			}
		}
		v.to = math.Max(v.to, last.Sub(pod.deleted).Seconds()+1.5)
	}
	for _, c := range cells {
		sr := binned(c, v)
		for i := range sr.ok {
			v.ymax = math.Max(v.ymax, math.Max(sr.ok[i].Y, sr.failed[i].Y))
		}
	}
	return v
}

// binned counts c's requests per bin of v, by send time, up to the end of
// the cell's traffic.
func binned(c cellResult, v view) series {
	pod := c.pods[0]
	x := func(t time.Time) float64 { return t.Sub(pod.deleted).Seconds() }
	end := math.Min(v.to, x(c.end))
	nb := int(math.Floor((end - v.from) / binWidth.Seconds()))
	sr := series{make(plotter.XYs, nb), make(plotter.XYs, nb), make(plotter.XYs, nb)}
	for i := range nb {
		sr.ok[i].X = v.from + (float64(i)+0.5)*binWidth.Seconds()
		sr.failed[i].X, sr.draining[i].X = sr.ok[i].X, sr.ok[i].X
	}
	for _, o := range c.outcomes {
		i := int(math.Floor((x(o.Sent) - v.from) / binWidth.Seconds()))
		if i < 0 || i >= nb {
			continue
		}
		if o.Kind == harness.KindOK {
			sr.ok[i].Y += 1 / binWidth.Seconds()
			if o.Pod == pod.name {
				sr.draining[i].Y += 1 / binWidth.Seconds()
			}
		} else {
			sr.failed[i].Y += 1 / binWidth.Seconds()
		}
	}
	return sr
}

// cellPlot is one strategy's panel: successful and failed requests per
// second around the first old pod's stop, and that pod's phase changes.
func cellPlot(c cellResult, v view, legend bool) (*plot.Plot, error) {
	pod := c.pods[0]
	x := func(t time.Time) float64 { return t.Sub(pod.deleted).Seconds() }
	sr := binned(c, v)
	ok, failed, draining := sr.ok, sr.failed, sr.draining
	from, to := v.from, v.to
	p := plot.New()
	var nfail int
	for _, o := range c.outcomes {
		if o.Kind != harness.KindOK {
			nfail++
		}
	}
	p.Title.Text = fmt.Sprintf("%s — clients %s, kube-proxy %s: %d failed of %d; %s drain %.2f s",
		c.strat.name, c.pat, c.proxy(), nfail, len(c.outcomes), pod.name, pod.drain().Seconds())
	p.X.Label.Text = fmt.Sprintf("seconds since %s (on %s) was deleted", pod.name, pod.node)
	p.Y.Label.Text = "requests/s (by send time)"
	p.X.Min, p.X.Max = from, to
	// Headroom above the data for the legend of the first panel.
	ymax := v.ymax * 1.9
	p.Y.Min, p.Y.Max = 0, ymax
	lok, err := plotter.NewLine(ok)
	if err != nil {
		return nil, err
	}
	lok.Color, lok.Width = okColor, vg.Points(1.2)
	lfail, err := plotter.NewLine(failed)
	if err != nil {
		return nil, err
	}
	lfail.Color, lfail.Width = failColor, vg.Points(1.5)
	ldr, err := plotter.NewLine(draining)
	if err != nil {
		return nil, err
	}
	ldr.Color, ldr.Width = drainColor, vg.Points(1)
	p.Add(lok, ldr, lfail)
	if legend {
		p.Legend.Add("answered", lok)
		p.Legend.Add("answered by the stopping pod", ldr)
		p.Legend.Add("failed", lfail)
	}
	add := func(mk marker, at time.Time, label bool) error {
		if at.IsZero() {
			return nil
		}
		l, err := plotter.NewLine(plotter.XYs{{X: x(at), Y: 0}, {X: x(at), Y: ymax}})
		if err != nil {
			return err
		}
		l.Color, l.Width = mk.color, vg.Points(1)
		if mk.dash {
			l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		}
		p.Add(l)
		if legend && label {
			p.Legend.Add(mk.name, l)
		}
		return nil
	}
	first := true
	for _, n := range sortedKeys(pod.nodeRules) {
		if err := add(mRules, pod.nodeRules[n], first); err != nil {
			return nil, err
		}
		first = false
	}
	for _, e := range []struct {
		mk marker
		at time.Time
	}{{mStop, pod.deleted}, {mWithdrawn, pod.hapsuperW}, {mEnded, pod.ended}, {mSoft, pod.soft}, {mExit, pod.master}} {
		if e.mk == mEnded && !pod.strat.underHapsuper() {
			continue // the soft stop is the end of a sleep
		}
		if err := add(e.mk, e.at, true); err != nil {
			return nil, err
		}
	}
	if legend {
		p.Legend.Top = true
		p.Legend.TextStyle.Font.Size = vg.Points(8)
	}
	return p, nil
}

func sortedKeys(m map[string]time.Time) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}
