// Command soakplot draws the CSV that scripts/soak.sh writes (the -csv of
// internal/cmd/soak) as line charts, one PNG per group of figures, into
// the directory -o:
//
//	redis-keys.png     Redis keys (DBSIZE)
//	redis-memory.png   Redis used_memory, MiB
//	rss.png            resident memory of replicas A and B, MiB
//	goroutines.png     goroutines of replicas A and B
//	fds.png            open files of replicas A and B
//	operations.png     operations per minute: ok, expected errors, unexpected errors
//
// The x axis is the minute, the y axis starts at zero, and the warm-up
// minutes are shaded. It needs only the standard library: lines are drawn
// pixel by pixel, text with a 5×7 bitmap font. For docs/:
//
//	go run ./internal/cmd/soakplot -o docs/soak path/to/soak.csv
package main

import (
	"encoding/csv"
	"errors"
	"flag"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
)

// series is one line: a CSV column.
type series struct {
	column, label string
	color         color.RGBA
}

// group is one chart.
type group struct {
	file, title string
	scale       float64 // the values are divided by it
	series      []series
}

var (
	blue   = color.RGBA{0x1f, 0x77, 0xb4, 0xff}
	orange = color.RGBA{0xff, 0x7f, 0x0e, 0xff}
	green  = color.RGBA{0x2c, 0xa0, 0x2c, 0xff}
	red    = color.RGBA{0xd6, 0x27, 0x28, 0xff}
)

var groups = []group{
	{"redis-keys.png", "Redis keys", 1, []series{{"redis_keys", "keys", blue}}},
	{"redis-memory.png", "Redis used_memory (MiB)", 1 << 20, []series{{"redis_used_memory", "used_memory", blue}}},
	{"rss.png", "RSS of the replicas (MiB)", 1 << 20, []series{{"a_rss", "A", blue}, {"b_rss", "B", orange}}},
	{"goroutines.png", "Goroutines of the replicas", 1, []series{{"a_goroutines", "A", blue}, {"b_goroutines", "B", orange}}},
	{"fds.png", "Open files of the replicas", 1, []series{{"a_fds", "A", blue}, {"b_fds", "B", orange}}},
	{"operations.png", "Operations per minute", 1, []series{{"ok", "ok", green}, {"expected", "expected errors", orange}, {"unexpected", "unexpected errors", red}}},
}

func main() {
	dir := flag.String("o", ".", "directory to write the PNG files to")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "Usage: %s [-o dir] soak.csv\n", os.Args[0])
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 1 {
		flag.Usage()
		os.Exit(2)
	}
	if err := plotFile(flag.Arg(0), *dir); err != nil {
		fmt.Fprintln(os.Stderr, "soakplot:", err)
		os.Exit(1)
	}
}

// plotFile reads the CSV at path and writes every group's PNG to dir.
func plotFile(path, dir string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	t, err := readTable(f)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, g := range groups {
		img, err := draw(t, g)
		if err != nil {
			return fmt.Errorf("%s: %w", g.file, err)
		}
		if err := writePNG(filepath.Join(dir, g.file), img); err != nil {
			return err
		}
	}
	return nil
}

func writePNG(path string, img image.Image) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := png.Encode(f, img); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// table is the CSV: its columns by name, each row's values.
type table struct {
	cols map[string]int
	rows [][]float64
}

func (t *table) column(name string) ([]float64, error) {
	i, ok := t.cols[name]
	if !ok {
		return nil, fmt.Errorf("no column %q", name)
	}
	out := make([]float64, len(t.rows))
	for r, row := range t.rows {
		out[r] = row[i]
	}
	return out, nil
}

func readTable(r io.Reader) (*table, error) {
	recs, err := csv.NewReader(r).ReadAll()
	if err != nil {
		return nil, err
	}
	if len(recs) < 2 {
		return nil, errors.New("no rows")
	}
	t := &table{cols: map[string]int{}}
	for i, name := range recs[0] {
		t.cols[name] = i
	}
	for _, rec := range recs[1:] {
		row := make([]float64, len(rec))
		for i, s := range rec {
			if row[i], err = strconv.ParseFloat(s, 64); err != nil {
				return nil, fmt.Errorf("column %s: %w", recs[0][i], err)
			}
		}
		t.rows = append(t.rows, row)
	}
	for _, need := range []string{"minute", "warmup"} {
		if _, ok := t.cols[need]; !ok {
			return nil, fmt.Errorf("no column %q", need)
		}
	}
	return t, nil
}

// Chart geometry, in pixels.
const (
	width, height            = 800, 400
	left, right, top, bottom = 80, 24, 56, 48
)

var (
	white = color.RGBA{0xff, 0xff, 0xff, 0xff}
	black = color.RGBA{0x20, 0x20, 0x20, 0xff}
	grid  = color.RGBA{0xe4, 0xe4, 0xe4, 0xff}
	warm  = color.RGBA{0xf2, 0xf2, 0xf2, 0xff}
)

// draw renders one group of t.
func draw(t *table, g group) (*image.RGBA, error) {
	minutes, _ := t.column("minute")
	warmup, _ := t.column("warmup")
	lines := make([][]float64, len(g.series))
	hi := 0.0
	for i, s := range g.series {
		vs, err := t.column(s.column)
		if err != nil {
			return nil, err
		}
		for j := range vs {
			vs[j] /= g.scale
			hi = max(hi, vs[j])
		}
		lines[i] = vs
	}
	img := image.NewRGBA(image.Rect(0, 0, width, height))
	fill(img, img.Rect, white)
	x0, x1, y0, y1 := left, width-right, height-bottom, top // plot area; y grows down
	lastMinute := max(minutes[len(minutes)-1], 1)
	px := func(m float64) int { return x0 + int(math.Round(m/lastMinute*float64(x1-x0))) }
	ystep, ymax := niceScale(hi)
	py := func(v float64) int { return y0 - int(math.Round(v/ymax*float64(y0-y1))) }

	// The warm-up: up to the last minute marked warmup.
	endWarm := 0.0
	for i, w := range warmup {
		if w == 1 {
			endWarm = minutes[i]
		}
	}
	fill(img, image.Rect(px(0), y1, px(endWarm)+1, y0), warm)
	if endWarm > 0 {
		drawText(img, px(0)+4, y1+4, "warm-up", 1, black)
	}

	// Grid, y ticks.
	for v := 0.0; v <= ymax+ystep/2; v += ystep {
		y := py(v)
		hline(img, x0, x1, y, grid)
		label := formatTick(v, ystep)
		drawText(img, x0-8-textWidth(label, 1), y-3, label, 1, black)
	}
	// x ticks.
	xstep := niceStep(lastMinute / 10)
	xstep = max(xstep, 1)
	for m := 0.0; m <= lastMinute+xstep/2; m += xstep {
		x := px(m)
		vline(img, x, y0, y0+4, black)
		label := formatTick(m, xstep)
		drawText(img, x-textWidth(label, 1)/2, y0+8, label, 1, black)
	}
	hline(img, x0, x1, y0, black)
	vline(img, x0, y1, y0, black)
	drawText(img, (x0+x1-textWidth("minute", 1))/2, height-16, "minute", 1, black)
	drawText(img, left, 14, g.title, 2, black)

	// Lines, then a dot at each minute.
	for i, s := range g.series {
		vs := lines[i]
		for j := 1; j < len(vs); j++ {
			thickLine(img, px(minutes[j-1]), py(vs[j-1]), px(minutes[j]), py(vs[j]), s.color)
		}
		for j := range vs {
			fill(img, image.Rect(px(minutes[j])-2, py(vs[j])-2, px(minutes[j])+3, py(vs[j])+3), s.color)
		}
	}

	// Legend, top right.
	x := x1
	for i := len(g.series) - 1; i >= 0; i-- {
		s := g.series[i]
		x -= textWidth(s.label, 1)
		drawText(img, x, 40, s.label, 1, black)
		x -= 18
		fill(img, image.Rect(x, 42, x+12, 45), s.color)
		x -= 16
	}
	return img, nil
}

// niceStep returns 1, 2 or 5 times a power of ten, at least raw.
func niceStep(raw float64) float64 {
	if raw <= 0 {
		return 1
	}
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*mag >= raw {
			return m * mag
		}
	}
	return 10 * mag
}

// niceScale returns the step of about five y ticks from zero, and the top
// of the axis, a multiple of the step at or above hi.
func niceScale(hi float64) (step, top float64) {
	if hi <= 0 {
		return 1, 1
	}
	step = niceStep(hi / 5)
	return step, math.Ceil(hi/step) * step
}

// formatTick shows v with as many decimals as step needs.
func formatTick(v, step float64) string {
	d := 0
	for s := step; s < 1 && d < 6; s *= 10 {
		d++
	}
	return strconv.FormatFloat(v, 'f', d, 64)
}

func fill(img *image.RGBA, r image.Rectangle, c color.RGBA) {
	r = r.Intersect(img.Rect)
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			img.SetRGBA(x, y, c)
		}
	}
}

func hline(img *image.RGBA, x0, x1, y int, c color.RGBA) {
	fill(img, image.Rect(min(x0, x1), y, max(x0, x1)+1, y+1), c)
}

func vline(img *image.RGBA, x, y0, y1 int, c color.RGBA) {
	fill(img, image.Rect(x, min(y0, y1), x+1, max(y0, y1)+1), c)
}

// thickLine draws a line two pixels wide from (x0, y0) to (x1, y1)
// (Bresenham's).
func thickLine(img *image.RGBA, x0, y0, x1, y1 int, c color.RGBA) {
	dx, dy := abs(x1-x0), -abs(y1-y0)
	sx, sy := sign(x1-x0), sign(y1-y0)
	e := dx + dy
	for {
		fill(img, image.Rect(x0, y0, x0+2, y0+2), c)
		if x0 == x1 && y0 == y1 {
			return
		}
		e2 := 2 * e
		if e2 >= dy {
			e += dy
			x0 += sx
		}
		if e2 <= dx {
			e += dx
			y0 += sy
		}
	}
}

func abs(v int) int { return max(v, -v) }

func sign(v int) int {
	switch {
	case v > 0:
		return 1
	case v < 0:
		return -1
	}
	return 0
}
