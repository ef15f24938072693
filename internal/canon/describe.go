package canon

import (
	"fmt"
	"strconv"
	"unicode"
	"unicode/utf8"

	"github.com/mcphandler/mcphandler/internal/decimal"
)

// Defaults of DescribeOptions.
const (
	// DefaultBudget is the most runes a rendering takes.
	DefaultBudget = 2000
	// DefaultStringRunes is how many characters of a long string or number
	// are shown.
	DefaultStringRunes = 200
	// DefaultItems is how many elements of a long array or nested object are
	// shown.
	DefaultItems = 16
)

// DescribeOptions bound the rendering of Describe. The zero value uses the
// defaults.
type DescribeOptions struct {
	// Budget is the most runes the rendering may take. If zero (or
	// negative), DefaultBudget.
	Budget int
	// StringRunes is how many characters of a long string or number are
	// shown, the first half from its start and the rest from its end. If
	// zero (or negative), DefaultStringRunes.
	StringRunes int
	// Items is how many elements of a long array, or members of a nested
	// object, are shown: the first half (rounded up) and the last ones. If
	// zero (or negative), DefaultItems.
	Items int
}

// Describe renders the JSON value b for a human to approve, as compact
// JSON-like text of at most opt.Budget runes, from its canonical form
// (Canonical): members in canonical order, numbers as exact decimals in
// plain notation (123.456, 0.001, 2.5e30). Nothing the value holds is hidden
// without a visible marker:
//
//   - Every member of a top-level object is shown, its key in full. If the
//     keys cannot all fit in the budget, even with every value elided,
//     Describe returns an error wrapping ErrTooLong: a caller asking a human
//     must then refuse rather than show less.
//   - A long string or number is cut inside itself, keeping its start and
//     its end around a marker that counts what is left out:
//     "aaaa…[1234 characters elided]…zzzz".
//   - A long array, or a nested object with many members, shows its first
//     and last elements around …[N more items]…; elided entirely it reads
//     […[N items]…].
//   - Characters a human cannot see or that reorder text are escaped as
//     \uXXXX (a UTF-16 surrogate pair beyond U+FFFF), never dropped: C0 and
//     C1 controls and DEL, format characters (Cf: bidi overrides and
//     isolates, zero-width characters, the BOM, tags), line and paragraph
//     separators, spaces other than U+0020, private-use, surrogate and
//     unassigned code points, variation selectors and other default
//     ignorable code points, U+2800, and U+FFFD (what invalid UTF-8 was
//     replaced by). '"' and '\' are escaped as \" and \\, and '…' (U+2026)
//     as \u2026, so that a value cannot forge a quote or a marker.
//
// Elision starts with opt.StringRunes characters per string and opt.Items
// elements per container, and halves both until the rendering fits. The
// error for invalid JSON is one of Check's (under the zero Limits). Describe
// runs in time linear in len(b).
func Describe(b []byte, opt DescribeOptions) (string, error) {
	if opt.Budget <= 0 {
		opt.Budget = DefaultBudget
	}
	if opt.StringRunes <= 0 {
		opt.StringRunes = DefaultStringRunes
	}
	if opt.Items <= 0 {
		opt.Items = DefaultItems
	}
	c, err := Canonical(b)
	if err != nil {
		return "", err
	}
	d := describer{c: c, jump: jumps(c), budget: opt.Budget}
	// Level k shows StringRunes>>k characters and Items>>k elements; the
	// last level shows none. The rendering shrinks as k grows, so the most
	// generous level that fits is found by bisection.
	last := 0
	for opt.StringRunes>>last > 0 || opt.Items>>last > 0 {
		last++
	}
	if out, ok := d.render(opt, 0); ok {
		return out, nil
	}
	best, ok := d.render(opt, last)
	if !ok {
		return "", fmt.Errorf("%w: even with every value elided it needs more than %d runes", ErrTooLong, opt.Budget)
	}
	lo, hi := 0, last // lo does not fit, hi fits
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		if out, ok := d.render(opt, mid); ok {
			best, hi = out, mid
		} else {
			lo = mid
		}
	}
	return best, nil
}

// jumps maps the offset of each '[' and '{' of the canonical encoding c to
// the offset after its matching bracket, so that a container is skipped in
// O(1).
func jumps(c []byte) []int32 {
	jump := make([]int32, len(c))
	var stack []int32
	for i := 0; i < len(c); i++ {
		switch c[i] {
		case '"':
			i = stringEnd(c, i) - 1
		case '[', '{':
			stack = append(stack, int32(i))
		case ']', '}':
			jump[stack[len(stack)-1]] = int32(i + 1)
			stack = stack[:len(stack)-1]
		}
	}
	return jump
}

// stringEnd returns the offset after the canonical string at i.
func stringEnd(c []byte, i int) int {
	for i++; ; i++ {
		switch c[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
}

// describer renders a canonical encoding.
type describer struct {
	c      []byte
	jump   []int32
	budget int

	// One rendering:
	out          []byte
	runes        int // runes in out
	over         bool
	strRunes     int // characters of a string shown
	items        int // elements of a container shown
	head, tail   int // of items: shown first and last
	ring         []int32
	sHead, sTail int // of strRunes
}

// render renders at level k and reports whether it fits the budget.
func (d *describer) render(opt DescribeOptions, k int) (string, bool) {
	d.out, d.runes, d.over = d.out[:0], 0, false
	d.strRunes, d.items = opt.StringRunes>>k, opt.Items>>k
	d.head = d.items - d.items/2
	d.tail = d.items / 2
	d.sHead = d.strRunes - d.strRunes/2
	d.sTail = d.strRunes / 2
	if d.c[0] == '{' {
		d.topObject()
	} else {
		d.value(0)
	}
	if d.over {
		return "", false
	}
	return string(d.out), true
}

// end returns the offset after the value at i.
func (d *describer) end(i int) int {
	switch c := d.c[i]; c {
	case '[', '{':
		return int(d.jump[i])
	case '"':
		return stringEnd(d.c, i)
	case 't', 'n':
		return i + 4
	case 'f':
		return i + 5
	}
	for i < len(d.c) && d.c[i] != ',' && d.c[i] != ']' && d.c[i] != '}' {
		i++
	}
	return i
}

func (d *describer) write(s string) {
	if d.over {
		return
	}
	d.out = append(d.out, s...)
	d.runes += utf8.RuneCountInString(s)
	d.over = d.runes > d.budget
}

func (d *describer) writeByte(c byte) {
	if d.over {
		return
	}
	d.out = append(d.out, c)
	d.runes++
	d.over = d.runes > d.budget
}

// topObject renders every member of the top-level object.
func (d *describer) topObject() {
	d.writeByte('{')
	i := 1
	for n := 0; d.c[i] != '}' && !d.over; n++ {
		if n > 0 {
			d.writeByte(',')
			i++ // ','
		}
		i = d.member(i, 1)
	}
	d.writeByte('}')
}

// member renders the object member at i (a key, ':', a value) inside a
// container at depth, and returns the offset after it.
func (d *describer) member(i, depth int) int {
	i = d.str(i, true)
	d.writeByte(':')
	return d.valueAt(i+1, depth)
}

func (d *describer) value(i int) { d.valueAt(i, 0) }

// valueAt renders the value at i at the given depth and returns the offset
// after it.
func (d *describer) valueAt(i, depth int) int {
	if d.over {
		return d.end(i)
	}
	switch c := d.c[i]; c {
	case '[', '{':
		return d.container(i, depth)
	case '"':
		return d.str(i, false)
	case 't':
		d.write("true")
		return i + 4
	case 'f':
		d.write("false")
		return i + 5
	case 'n':
		d.write("null")
		return i + 4
	}
	end := d.end(i)
	d.number(d.c[i:end])
	return end
}

// container renders the array or object at i: all its elements when they
// are at most d.items, else the first d.head and the last d.tail around a
// marker.
func (d *describer) container(i, depth int) int {
	open, obj := d.c[i], d.c[i] == '{'
	closing := byte(']')
	if obj {
		closing = '}'
	}
	end := int(d.jump[i])
	d.writeByte(open)
	elem := func(j int) int {
		if obj {
			return d.member(j, depth+1)
		}
		return d.valueAt(j, depth+1)
	}
	// Render the first head elements, then walk the rest keeping the
	// offsets of the last tail ones.
	j, n := i+1, 0
	for ; d.c[j] != closing && n < d.head; n++ {
		if n > 0 {
			d.writeByte(',')
			j++
		}
		j = elem(j)
	}
	ring := d.ring[:0]
	rest := 0
	for d.c[j] != closing {
		if n > 0 || rest > 0 {
			j++ // ','
		}
		if d.tail > 0 {
			if len(ring) < d.tail {
				ring = append(ring, int32(j))
			} else {
				ring[rest%d.tail] = int32(j)
			}
		}
		rest++
		if obj {
			j = stringEnd(d.c, j) + 1 // key and ':'
		}
		j = d.end(j)
	}
	d.ring = ring[:0]
	total := n + rest
	// Tail elements in order: ring is a circular buffer of the last ones.
	shown := rest
	if total > d.items {
		shown = min(rest, d.tail)
		elided := rest - shown
		if n > 0 {
			d.writeByte(',')
		}
		if n == 0 && shown == 0 {
			d.write("…[" + strconv.Itoa(total) + plural(total, " item", " items") + "]…")
		} else {
			d.write("…[" + strconv.Itoa(elided) + plural(elided, " more item", " more items") + "]…")
		}
	}
	if shown > 0 {
		tail := make([]int32, 0, shown)
		start := 0
		if rest > len(ring) {
			start = rest % len(ring)
		}
		for k := 0; k < len(ring); k++ {
			tail = append(tail, ring[(start+k)%len(ring)])
		}
		tail = tail[len(tail)-shown:]
		for k, t := range tail {
			if k > 0 || n > 0 || total > d.items {
				d.writeByte(',')
			}
			elem(int(t))
		}
	}
	d.writeByte(closing)
	return end
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// str renders the canonical string at i, whole if key, else elided in its
// middle when it has more than d.strRunes characters and eliding shortens
// it, and returns the offset after it.
func (d *describer) str(i int, key bool) int {
	end := stringEnd(d.c, i)
	raw := d.c[i+1 : end-1]
	d.writeByte('"')
	if !key && len(raw) > d.strRunes {
		if total, width := measure(raw, -1); total > d.strRunes {
			elided := total - d.sHead - d.sTail
			marker := "…[" + strconv.Itoa(elided) + plural(elided, " character", " characters") + " elided]…"
			_, headWidth := measure(raw, d.sHead)
			tailStart, _ := skipChars(raw, total-d.sTail)
			_, tailWidth := measure(raw[tailStart:], -1)
			if headWidth+utf8.RuneCountInString(marker)+tailWidth < width {
				headEnd, _ := skipChars(raw, d.sHead)
				d.chars(raw[:headEnd])
				d.write(marker)
				d.chars(raw[tailStart:])
				d.writeByte('"')
				return end
			}
		}
	}
	d.chars(raw)
	d.writeByte('"')
	return end
}

// measure returns the number of characters of the canonical string content
// raw (or of its first n when n ≥ 0) and the runes they render to.
func measure(raw []byte, n int) (chars, width int) {
	for j := 0; j < len(raw) && chars != n; chars++ {
		var r rune
		r, j = canonRune(raw, j)
		width += charWidth(r)
	}
	return chars, width
}

// skipChars returns the offset of character n of raw.
func skipChars(raw []byte, n int) (int, int) {
	j := 0
	for k := 0; k < n; k++ {
		_, j = canonRune(raw, j)
	}
	return j, n
}

// chars renders the characters of the canonical string content raw.
func (d *describer) chars(raw []byte) {
	for j := 0; j < len(raw) && !d.over; {
		var r rune
		r, j = canonRune(raw, j)
		d.char(r)
	}
}

// charWidth is the number of runes char renders r to.
func charWidth(r rune) int {
	switch {
	case r == '"' || r == '\\':
		return 2
	case !hidden(r):
		return 1
	case r > 0xffff:
		return 12
	}
	return 6
}

// markerLen is the length in runes of the marker for n elided characters.
func markerLen(n int) int {
	return utf8.RuneCountInString("…[ characters elided]…") + len(strconv.Itoa(n))
}

// canonRune decodes one character of the content of a canonical string,
// whose only escapes are \", \\ and \u00XX.
func canonRune(raw []byte, j int) (rune, int) {
	c := raw[j]
	if c == '\\' {
		if raw[j+1] == 'u' {
			return hex4(raw[j+2:]), j + 6
		}
		return rune(raw[j+1]), j + 2
	}
	if c < utf8.RuneSelf {
		return rune(c), j + 1
	}
	r, size := utf8.DecodeRune(raw[j:])
	return r, j + size
}

// char renders one character of a string.
func (d *describer) char(r rune) {
	switch {
	case r == '"' || r == '\\':
		d.write(`\` + string(r))
	case r >= 0x20 && r < 0x7f:
		d.writeByte(byte(r))
	case hidden(r):
		var buf [12]byte
		if r > 0xffff {
			r -= 0x10000
			d.write(string(appendU4(appendU4(buf[:0], 0xd800+r>>10), 0xdc00+r&0x3ff)))
		} else {
			d.write(string(appendU4(buf[:0], r)))
		}
	default:
		if d.over {
			return
		}
		d.out = utf8.AppendRune(d.out, r)
		d.runes++
		d.over = d.runes > d.budget
	}
}

func appendU4(dst []byte, r rune) []byte {
	return append(dst, '\\', 'u', hexDigits[r>>12&0xf], hexDigits[r>>8&0xf], hexDigits[r>>4&0xf], hexDigits[r&0xf])
}

// hidden reports whether r is escaped by Describe (documented there).
func hidden(r rune) bool {
	if r < utf8.RuneSelf {
		return r < 0x20 || r == 0x7f
	}
	switch r {
	case utf8.RuneError, '…', '\u2800':
		return true
	}
	return !unicode.IsPrint(r) || unicode.In(r, unicode.Variation_Selector, unicode.Other_Default_Ignorable_Code_Point)
}

// number renders the canonical number lit as an exact decimal in plain
// notation, elided in the middle when longer than d.strRunes.
func (d *describer) number(lit []byte) {
	n, _ := decimal.Parse(string(lit), true)
	s := plainNumber(n)
	total := len(s) // ASCII
	if total <= d.strRunes || total-d.sHead-d.sTail <= markerLen(total-d.sHead-d.sTail) {
		d.write(s)
		return
	}
	elided := total - d.sHead - d.sTail
	d.write(s[:d.sHead])
	d.write("…[" + strconv.Itoa(elided) + plural(elided, " character", " characters") + " elided]…")
	d.write(s[total-d.sTail:])
}

// plainNumber writes n the way people write numbers: 150, -1.5, 0.001,
// 2.5e30, 1e-7: scientific beyond 21 integer digits or 5 zeros after the
// point, as JavaScript writes numbers.
func plainNumber(n decimal.Number) string {
	if n.IsZero() {
		return "0"
	}
	var b []byte
	if n.Neg {
		b = append(b, '-')
	}
	digits := n.Digits
	l := len(digits)
	e, small := n.Exp.Int64()
	switch {
	case small && e >= 0 && int64(l)+e <= 21:
		b = append(b, digits...)
		for range e {
			b = append(b, '0')
		}
	case small && e < 0 && -e < int64(l):
		point := l + int(e)
		b = append(b, digits[:point]...)
		b = append(b, '.')
		b = append(b, digits[point:]...)
	case small && e < 0 && -e-int64(l) <= 5:
		b = append(b, '0', '.')
		for range -e - int64(l) {
			b = append(b, '0')
		}
		b = append(b, digits...)
	default:
		b = append(b, digits[0])
		if l > 1 {
			b = append(b, '.')
			b = append(b, digits[1:]...)
		}
		b = append(b, 'e')
		b = n.Exp.Add(int64(l - 1)).Append(b)
	}
	return string(b)
}
