package main

import (
	"fmt"
	"image"
	"image/color"
	"image/png"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode"
)

// testCSV is a soak's CSV of minutes minutes, the first warm of them
// warm-up, with every column soakplot reads.
func testCSV(minutes, warm int) string {
	var b strings.Builder
	b.WriteString("minute,warmup,ops,ok,expected,unexpected,redis_keys,redis_used_memory,a_rss,b_rss,a_goroutines,b_goroutines,a_fds,b_fds\n")
	for m := 0; m <= minutes; m++ {
		w := 0
		if m <= warm {
			w = 1
		}
		fmt.Fprintf(&b, "%d,%d,%d,%d,%d,0,%d,%d,%d,%d,%d,%d,%d,%d\n", m, w, 480*min(m, 1), 400*min(m, 1), 80*min(m, 1),
			550+m, 2<<20+m*1000, 19<<20+m<<16, 20<<20, 18+m%3, 20, 21, 22)
	}
	return b.String()
}

// TestPlot: every group's PNG is written, the size of a chart, and each
// series' colour is on it.
func TestPlot(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "soak.csv")
	if err := os.WriteFile(in, []byte(testCSV(60, 10)), 0o600); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "plots")
	if err := plotFile(in, out); err != nil {
		t.Fatal(err)
	}
	for _, g := range groups {
		f, err := os.Open(filepath.Join(out, g.file))
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(f)
		f.Close()
		if err != nil {
			t.Fatalf("%s: %v", g.file, err)
		}
		if b := img.Bounds(); b.Dx() != width || b.Dy() != height {
			t.Fatalf("%s: %v", g.file, b)
		}
		for _, s := range g.series {
			if !has(img, s.color) {
				t.Errorf("%s: no pixel of the colour of %s", g.file, s.label)
			}
		}
	}
}

func has(img image.Image, c color.RGBA) bool {
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			if color.RGBAModel.Convert(img.At(x, y)) == c {
				return true
			}
		}
	}
	return false
}

// TestPlotErrors: a CSV without rows, or without a column a chart needs,
// is an error, not a picture.
func TestPlotErrors(t *testing.T) {
	dir := t.TempDir()
	for name, text := range map[string]string{
		"empty":        "minute,warmup\n",
		"no column":    "minute,warmup,ops\n0,1,0\n",
		"not a number": strings.Replace(testCSV(3, 2), "\n1,1,", "\nx,1,", 1),
	} {
		in := filepath.Join(dir, "soak.csv")
		os.WriteFile(in, []byte(text), 0o600)
		if err := plotFile(in, filepath.Join(dir, "out")); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// TestGlyphs: every character of the charts' fixed text is in the font.
func TestGlyphs(t *testing.T) {
	text := "warm-up minute 0123456789."
	for _, g := range groups {
		text += g.title
		for _, s := range g.series {
			text += s.label
		}
	}
	for _, r := range text {
		if _, ok := glyphs[unicode.ToUpper(r)]; !ok {
			t.Errorf("no glyph for %q", r)
		}
	}
}

// TestThickLine: lines end, in any direction, and reach both ends.
func TestThickLine(t *testing.T) {
	img := image.NewRGBA(image.Rect(0, 0, 100, 100))
	red := color.RGBA{0xff, 0, 0, 0xff}
	for range 1000 {
		x0, y0, x1, y1 := rand.IntN(98), rand.IntN(98), rand.IntN(98), rand.IntN(98)
		fill(img, img.Rect, white)
		thickLine(img, x0, y0, x1, y1, red)
		if img.RGBAAt(x0, y0) != red || img.RGBAAt(x1, y1) != red {
			t.Fatalf("line (%d,%d)-(%d,%d) misses an end", x0, y0, x1, y1)
		}
	}
}

func TestNiceScale(t *testing.T) {
	for _, tc := range []struct{ hi, step, top float64 }{
		{0, 1, 1}, {1, 0.2, 1}, {7, 2, 8}, {550, 200, 600}, {19.3, 5, 20}, {2300, 500, 2500},
	} {
		if step, top := niceScale(tc.hi); step != tc.step || top != tc.top {
			t.Errorf("niceScale(%g) = %g, %g; want %g, %g", tc.hi, step, top, tc.step, tc.top)
		}
	}
	if got := formatTick(0.4, 0.2); got != "0.4" {
		t.Errorf("formatTick(0.4, 0.2) = %q", got)
	}
}
