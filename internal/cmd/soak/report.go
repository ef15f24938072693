package main

import (
	"encoding/csv"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// counts are operations that ended: as they should, with an error the
// soak means to cause (expected), or with any other error (unexpected).
type counts struct{ OK, Expected, Unexpected int64 }

func (c counts) done() int64 { return c.OK + c.Expected + c.Unexpected }

func (c counts) plus(o counts) counts {
	return counts{c.OK + o.OK, c.Expected + o.Expected, c.Unexpected + o.Unexpected}
}

// row is one minute of the soak: the medians of the figures sampled in
// it, and the operations that ended in it.
type row struct {
	Minute  int
	Warmup  bool
	Fig     figures
	Kinds   []counts // per kind, in the order of kinds
	Skipped int64    // operations not started: every worker was busy
	HTTP    int64    // HTTP requests sent
}

func (r row) total() counts {
	var t counts
	for _, c := range r.Kinds {
		t = t.plus(c)
	}
	return t
}

// tolerance is how much a figure may grow after the warm-up: the larger
// of pct percent of its value at the end of the warm-up and abs.
type tolerance struct {
	name     string
	get      func(figures) int64
	pct, abs int64
	mib      bool // a size in bytes, shown in MiB
}

func (t tolerance) allowed(ref int64) int64 { return max(ref*t.pct/100, t.abs) }

func (t tolerance) String() string {
	switch {
	case t.pct > 0 && t.abs > 0:
		return fmt.Sprintf("+%d%% or +%s, whichever is larger", t.pct, t.show(t.abs))
	case t.pct > 0:
		return fmt.Sprintf("+%d%%", t.pct)
	}
	return "+" + t.show(t.abs)
}

func (t tolerance) show(v int64) string {
	if t.mib {
		return fmt.Sprintf("%.1f MiB", float64(v)/(1<<20))
	}
	return strconv.FormatInt(v, 10)
}

// tolerances are the soak's: see scripts/soak.sh.
var tolerances = []tolerance{
	{name: "Redis keys", get: func(f figures) int64 { return f.Keys }, pct: 10, abs: 50},
	{name: "Redis used_memory", get: func(f figures) int64 { return f.Memory }, pct: 20, abs: 2 << 20, mib: true},
	{name: "goroutines A", get: func(f figures) int64 { return f.Goroutines[0] }, pct: 10, abs: 50},
	{name: "goroutines B", get: func(f figures) int64 { return f.Goroutines[1] }, pct: 10, abs: 50},
	{name: "RSS A", get: func(f figures) int64 { return f.RSS[0] }, pct: 20, mib: true},
	{name: "RSS B", get: func(f figures) int64 { return f.RSS[1] }, pct: 20, mib: true},
	{name: "open fds A", get: func(f figures) int64 { return f.FDs[0] }, abs: 10},
	{name: "open fds B", get: func(f figures) int64 { return f.FDs[1] }, abs: 10},
}

// verdict is one figure's check.
type verdict struct {
	tol             tolerance
	ref, last, grew int64
	ok              bool
}

// judge checks every figure of last against ref, the last minute of the
// warm-up.
func judge(ref, last figures) []verdict {
	out := make([]verdict, len(tolerances))
	for i, t := range tolerances {
		r, l := t.get(ref), t.get(last)
		out[i] = verdict{tol: t, ref: r, last: l, grew: l - r, ok: l-r <= t.allowed(r)}
	}
	return out
}

func (v verdict) String() string {
	state := "ok"
	if !v.ok {
		state = "GREW"
	}
	sign := "+"
	if v.grew < 0 {
		sign = "-"
	}
	return fmt.Sprintf("%-18s %10s -> %-10s %s%-10s tolerance %-10s %s", v.tol.name, v.tol.show(v.ref), v.tol.show(v.last),
		sign, v.tol.show(abs(v.grew)), "+"+v.tol.show(v.tol.allowed(v.ref)), state)
}

func abs(v int64) int64 { return max(v, -v) }

// column is one column of the minute table.
type column struct {
	head  string
	width int
	cell  func(r row) string
}

func mib(v int64) string { return fmt.Sprintf("%.1f", float64(v)/(1<<20)) }

func itoa(v int64) string { return strconv.FormatInt(v, 10) }

var columns = []column{
	{"minute", 6, func(r row) string { return strconv.Itoa(r.Minute) }},
	{"phase", 7, func(r row) string {
		switch {
		case r.Minute == 0:
			return "start"
		case r.Warmup:
			return "warm-up"
		}
		return "soak"
	}},
	{"ops", 6, func(r row) string { return itoa(r.total().done()) }},
	{"ok", 6, func(r row) string { return itoa(r.total().OK) }},
	{"expected", 8, func(r row) string { return itoa(r.total().Expected) }},
	{"unexpected", 10, func(r row) string { return itoa(r.total().Unexpected) }},
	{"skipped", 7, func(r row) string { return itoa(r.Skipped) }},
	{"http", 6, func(r row) string { return itoa(r.HTTP) }},
	{"keys", 7, func(r row) string { return itoa(r.Fig.Keys) }},
	{"redis_MiB", 9, func(r row) string { return mib(r.Fig.Memory) }},
	{"rss_A_MiB", 9, func(r row) string { return mib(r.Fig.RSS[0]) }},
	{"rss_B_MiB", 9, func(r row) string { return mib(r.Fig.RSS[1]) }},
	{"gor_A", 6, func(r row) string { return itoa(r.Fig.Goroutines[0]) }},
	{"gor_B", 6, func(r row) string { return itoa(r.Fig.Goroutines[1]) }},
	{"fd_A", 5, func(r row) string { return itoa(r.Fig.FDs[0]) }},
	{"fd_B", 5, func(r row) string { return itoa(r.Fig.FDs[1]) }},
}

func tableLine(cells func(c column) string) string {
	var b strings.Builder
	for i, c := range columns {
		if i > 0 {
			b.WriteString("  ")
		}
		if i == 1 {
			fmt.Fprintf(&b, "%-*s", c.width, cells(c))
		} else {
			fmt.Fprintf(&b, "%*s", c.width, cells(c))
		}
	}
	return b.String()
}

func tableHeader() string { return tableLine(func(c column) string { return c.head }) }

func tableRow(r row) string { return tableLine(func(c column) string { return c.cell(r) }) }

// csvHeader names the CSV's columns: the minute, the figures (sizes in
// bytes), then per kind its operations ok, expected and unexpected.
func csvHeader() []string {
	h := []string{"minute", "warmup", "ops", "ok", "expected", "unexpected", "skipped", "http",
		"redis_keys", "redis_used_memory", "a_rss", "b_rss", "a_goroutines", "b_goroutines", "a_fds", "b_fds"}
	for _, k := range kinds {
		h = append(h, k.name+"_ok", k.name+"_expected", k.name+"_unexpected")
	}
	return h
}

func csvRecord(r row) []string {
	t := r.total()
	warm := "0"
	if r.Warmup || r.Minute == 0 {
		warm = "1"
	}
	rec := []string{strconv.Itoa(r.Minute), warm, itoa(t.done()), itoa(t.OK), itoa(t.Expected), itoa(t.Unexpected), itoa(r.Skipped), itoa(r.HTTP),
		itoa(r.Fig.Keys), itoa(r.Fig.Memory), itoa(r.Fig.RSS[0]), itoa(r.Fig.RSS[1]),
		itoa(r.Fig.Goroutines[0]), itoa(r.Fig.Goroutines[1]), itoa(r.Fig.FDs[0]), itoa(r.Fig.FDs[1])}
	for i := range kinds {
		var c counts
		if i < len(r.Kinds) {
			c = r.Kinds[i]
		}
		rec = append(rec, itoa(c.OK), itoa(c.Expected), itoa(c.Unexpected))
	}
	return rec
}

// csvOut writes the rows as they come, flushed each time, so that a run
// cut short leaves what it measured.
type csvOut struct{ w *csv.Writer }

func newCSV(w io.Writer) (*csvOut, error) {
	c := &csvOut{csv.NewWriter(w)}
	return c, c.write(csvHeader())
}

func (c *csvOut) write(rec []string) error {
	c.w.Write(rec)
	c.w.Flush()
	return c.w.Error()
}
