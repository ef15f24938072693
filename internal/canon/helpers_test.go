package canon

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/mcphandler/mcphandler/internal/decimal"
)

// The attacker's inputs: one family per way of making a parser work hard,
// each at growing sizes. A linear parser keeps ns/B flat across sizes.
var families = []struct {
	name string
	gen  func(n int) []byte
}{
	{"huge_exponent", func(n int) []byte { return []byte(`{"a":1e` + strings.Repeat("7", n-9) + `}`) }},
	{"huge_mantissa", func(n int) []byte { return []byte(`{"a":1` + strings.Repeat("3", n-12) + `.5e-7}`) }},
	{"many_numbers", func(n int) []byte {
		var b strings.Builder
		b.WriteString(`[`)
		for i := 0; b.Len() < n-16; i++ {
			fmt.Fprintf(&b, "%d.%de%d,", i, i%97, i%41-20)
		}
		b.WriteString(`0]`)
		return []byte(b.String())
	}},
	{"deep_nesting", func(n int) []byte {
		// The payload at the bottom of nesting as deep as the limit allows:
		// a parser that copies each level into its parent pays depth × size.
		const d = DefaultMaxDepth - 1
		head, tail := strings.Repeat(`{"a":`, d), strings.Repeat(`}`, d)
		return []byte(head + `"` + strings.Repeat("x", n-len(head)-len(tail)-2) + `"` + tail)
	}},
	{"deep_many", func(n int) []byte {
		// Many values, each nested to the limit.
		const d = DefaultMaxDepth - 1
		one := strings.Repeat(`[`, d) + `1` + strings.Repeat(`]`, d)
		var b strings.Builder
		b.WriteString("[")
		for b.Len() < n-len(one)-2 {
			b.WriteString(one)
			b.WriteString(",")
		}
		b.WriteString("0]")
		return []byte(b.String())
	}},
	{"wide_object", func(n int) []byte {
		// About 100 000 keys per MiB, in an order far from sorted.
		var b strings.Builder
		b.WriteString("{")
		for i := 0; b.Len() < n-16; i++ {
			fmt.Fprintf(&b, `"%x":%d,`, uint32(i)*2654435761, i%10)
		}
		b.WriteString(`"":0}`)
		return []byte(b.String())
	}},
	{"escaped_strings", func(n int) []byte {
		var b strings.Builder
		b.WriteString(`{"s":"`)
		for b.Len() < n-40 {
			b.WriteString(`\u00e9\n\"\\é\ud83d\ude00 x`)
		}
		b.WriteString(`"}`)
		return []byte(b.String())
	}},
}

// toolsCall is a typical tools/call body (about 200 bytes).
var toolsCall = []byte(`{"jsonrpc":"2.0","id":17,"method":"tools/call","params":{"name":"delete_project","arguments":{"project":"alpha-7","force":true,"limit":50,"filters":{"labels":["bug","p1"],"since":"2026-07-01"}},"_meta":{"progressToken":"t-17"}}}`)

// args are the arguments of toolsCall.
var args = []byte(`{"project":"alpha-7","force":true,"limit":50,"filters":{"labels":["bug","p1"],"since":"2026-07-01"}}`)

func checkDescription(in []byte, got string, opt DescribeOptions) error {
	budget := opt.Budget
	if budget <= 0 {
		budget = DefaultBudget
	}
	if n := utf8.RuneCountInString(got); n > budget {
		return fmt.Errorf("rendering of %d runes, budget %d: %.200s", n, budget, got)
	}
	for _, r := range got {
		if r != '…' && hidden(r) {
			return fmt.Errorf("rendering holds %U unescaped: %q", r, got)
		}
	}
	p := &descParser{s: got}
	d, err := p.value()
	if err == nil && p.i != len(p.s) {
		err = fmt.Errorf("data after the value at %d", p.i)
	}
	if err != nil {
		return fmt.Errorf("cannot parse the rendering %q: %v", got, err)
	}
	var v any
	if len(bytes.TrimSpace(in)) > 0 {
		dec := json.NewDecoder(bytes.NewReader(in))
		dec.UseNumber()
		if err := dec.Decode(&v); err != nil {
			return fmt.Errorf("decode: %v", err)
		}
	}
	if err := d.matches(v, true); err != nil {
		return fmt.Errorf("rendering %.300q does not show %.300q: %v", got, in, err)
	}
	return nil
}

// dnode is a parsed rendering.
type dnode struct {
	kind       byte   // '{', '[', '"', '0' (number), 'l' (literal)
	text       string // a literal or unelided number
	head, tail string // a string or number; tail is set only if elided
	elided     int    // characters or elements left out
	cut        bool   // a marker was shown
	keys       []string
	elems      []*dnode
	marker     int // index in elems before which the marker stands
}

type descParser struct {
	s string
	i int
}

func (p *descParser) value() (*dnode, error) {
	if p.i >= len(p.s) {
		return nil, errors.New("unexpected end")
	}
	switch c := p.s[p.i]; {
	case c == '{' || c == '[':
		return p.container()
	case c == '"':
		return p.str()
	case strings.HasPrefix(p.s[p.i:], "true"), strings.HasPrefix(p.s[p.i:], "null"):
		p.i += 4
		return &dnode{kind: 'l', text: p.s[p.i-4 : p.i]}, nil
	case strings.HasPrefix(p.s[p.i:], "false"):
		p.i += 5
		return &dnode{kind: 'l', text: "false"}, nil
	}
	start := p.i
	for p.i < len(p.s) && strings.IndexByte("0123456789+-.eE", p.s[p.i]) >= 0 {
		p.i++
	}
	n := &dnode{kind: '0', head: p.s[start:p.i]}
	if strings.HasPrefix(p.s[p.i:], "…[") {
		elided, err := p.marker(" characters elided]…", " character elided]…")
		if err != nil {
			return nil, err
		}
		n.elided, n.cut = elided, true
		start = p.i
		for p.i < len(p.s) && strings.IndexByte("0123456789+-.eE", p.s[p.i]) >= 0 {
			p.i++
		}
		n.tail = p.s[start:p.i]
	}
	if n.head == "" && !n.cut {
		return nil, fmt.Errorf("unexpected %q at %d", p.s[p.i], p.i)
	}
	return n, nil
}

// marker reads …[N<suffix> and returns N.
func (p *descParser) marker(suffixes ...string) (int, error) {
	p.i += len("…[")
	start := p.i
	for p.i < len(p.s) && p.s[p.i] >= '0' && p.s[p.i] <= '9' {
		p.i++
	}
	n, err := strconv.Atoi(p.s[start:p.i])
	if err != nil {
		return 0, fmt.Errorf("bad marker count at %d", start)
	}
	for _, suf := range suffixes {
		if strings.HasPrefix(p.s[p.i:], suf) {
			p.i += len(suf)
			return n, nil
		}
	}
	return 0, fmt.Errorf("bad marker at %d: %.30q", start, p.s[p.i:])
}

func (p *descParser) str() (*dnode, error) {
	n := &dnode{kind: '"'}
	var b strings.Builder
	p.i++
	for {
		if p.i >= len(p.s) {
			return nil, errors.New("unterminated string")
		}
		switch c := p.s[p.i]; {
		case c == '"':
			p.i++
			if n.cut {
				n.tail = b.String()
			} else {
				n.head = b.String()
			}
			return n, nil
		case c == '\\':
			switch p.s[p.i+1] {
			case '"', '\\':
				b.WriteByte(p.s[p.i+1])
				p.i += 2
			case 'u':
				r := rune(mustHex(p.s[p.i+2 : p.i+6]))
				p.i += 6
				if r >= 0xd800 && r < 0xdc00 && strings.HasPrefix(p.s[p.i:], `\u`) {
					r2 := rune(mustHex(p.s[p.i+2 : p.i+6]))
					p.i += 6
					r = (r-0xd800)<<10 + (r2 - 0xdc00) + 0x10000
				}
				b.WriteRune(r)
			default:
				return nil, fmt.Errorf("bad escape at %d", p.i)
			}
		case strings.HasPrefix(p.s[p.i:], "…["):
			if n.cut {
				return nil, errors.New("two markers in a string")
			}
			elided, err := p.marker(" characters elided]…", " character elided]…")
			if err != nil {
				return nil, err
			}
			n.head, n.elided, n.cut = b.String(), elided, true
			b.Reset()
		default:
			r, size := utf8.DecodeRuneInString(p.s[p.i:])
			if r == '…' {
				return nil, fmt.Errorf("unescaped … at %d", p.i)
			}
			b.WriteRune(r)
			p.i += size
		}
	}
}

func mustHex(s string) uint64 {
	v, err := strconv.ParseUint(s, 16, 32)
	if err != nil {
		panic(err)
	}
	return v
}

func (p *descParser) container() (*dnode, error) {
	n := &dnode{kind: p.s[p.i], marker: -1}
	closing := byte(']')
	if n.kind == '{' {
		closing = '}'
	}
	p.i++
	for first := true; ; first = false {
		if p.i >= len(p.s) {
			return nil, errors.New("unterminated container")
		}
		if p.s[p.i] == closing {
			p.i++
			return n, nil
		}
		if !first {
			if p.s[p.i] != ',' {
				return nil, fmt.Errorf("want , at %d", p.i)
			}
			p.i++
		}
		if strings.HasPrefix(p.s[p.i:], "…[") {
			if n.cut {
				return nil, errors.New("two markers in a container")
			}
			elided, err := p.marker(" more items]…", " more item]…", " items]…", " item]…")
			if err != nil {
				return nil, err
			}
			n.elided, n.cut, n.marker = elided, true, len(n.elems)
			continue
		}
		if n.kind == '{' {
			k, err := p.str()
			if err != nil {
				return nil, err
			}
			if k.cut {
				return nil, errors.New("an elided key")
			}
			if p.i >= len(p.s) || p.s[p.i] != ':' {
				return nil, fmt.Errorf("want : at %d", p.i)
			}
			p.i++
			n.keys = append(n.keys, k.head)
		}
		e, err := p.value()
		if err != nil {
			return nil, err
		}
		n.elems = append(n.elems, e)
	}
}

// matches checks that d shows v (decoded with UseNumber).
func (d *dnode) matches(v any, top bool) error {
	switch v := v.(type) {
	case map[string]any:
		if d.kind != '{' {
			return fmt.Errorf("object shown as %c", d.kind)
		}
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		if top && d.cut {
			return errors.New("a top-level member is elided")
		}
		vals := make([]any, len(keys))
		for i, k := range keys {
			vals[i] = v[k]
		}
		return d.elements(keys, vals)
	case []any:
		if d.kind != '[' {
			return fmt.Errorf("array shown as %c", d.kind)
		}
		return d.elements(nil, v)
	case string:
		if d.kind != '"' {
			return fmt.Errorf("string shown as %c", d.kind)
		}
		return cutMatches(d, v)
	case json.Number:
		if d.kind != '0' {
			return fmt.Errorf("number shown as %c", d.kind)
		}
		n, _ := decimal.Parse(string(v), true)
		if !d.cut {
			shown, ok := decimal.Parse(d.head, true)
			if !ok || shown != n {
				return fmt.Errorf("number %s shown as %s", v, d.head)
			}
			return nil
		}
		return cutMatches(d, plainNumber(n))
	case bool, nil:
		want := fmt.Sprint(v)
		if v == nil {
			want = "null"
		}
		if d.kind != 'l' || d.text != want {
			return fmt.Errorf("%v shown as %q", v, d.text)
		}
		return nil
	}
	return fmt.Errorf("unexpected %T", v)
}

// elements checks the shown elements of a container against vals (and the
// keys of an object).
func (d *dnode) elements(keys []string, vals []any) error {
	shown := len(d.elems)
	if shown+d.elided != len(vals) {
		return fmt.Errorf("%d shown and %d elided of %d elements", shown, d.elided, len(vals))
	}
	if d.cut && d.elided == 0 {
		return errors.New("a marker for nothing")
	}
	idx := func(j int) int { // index in vals of shown element j
		if d.cut && j >= d.marker {
			return j + d.elided
		}
		return j
	}
	for j, e := range d.elems {
		i := idx(j)
		if keys != nil && d.keys[j] != keys[i] {
			return fmt.Errorf("key %q shown where %q is", d.keys[j], keys[i])
		}
		if err := e.matches(vals[i], false); err != nil {
			return fmt.Errorf("element %d: %w", i, err)
		}
	}
	return nil
}

// cutMatches checks a string or number shown whole or as head…tail.
func cutMatches(d *dnode, s string) error {
	if !d.cut {
		if d.head != s {
			return fmt.Errorf("%.40q shown as %.40q", s, d.head)
		}
		return nil
	}
	n := utf8.RuneCountInString(s)
	if utf8.RuneCountInString(d.head)+utf8.RuneCountInString(d.tail)+d.elided != n || d.elided <= 0 {
		return fmt.Errorf("%d+%d+%d characters shown of %d", utf8.RuneCountInString(d.head), utf8.RuneCountInString(d.tail), d.elided, n)
	}
	if !strings.HasPrefix(s, d.head) || !strings.HasSuffix(s, d.tail) {
		return fmt.Errorf("%.40q… …%.40q is not the start and end of %.80q", d.head, d.tail, s)
	}
	return nil
}
