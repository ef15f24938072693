package canon

import (
	"bytes"
	"encoding/binary"
	"hash/maphash"
	"math/bits"
	"slices"
	"sync"
	"unicode/utf8"
)

// smallObject is the number of keys up to which an object's keys are
// checked for duplicates pairwise as they are read; a larger object's keys
// are sorted once it closes (O(k log k)).
const smallObject = 16

// keyRef is one key of an object being read.
type keyRef struct {
	// pre holds the first 8 bytes of the key as compared (decoded, and
	// folded with FoldCase), big-endian and zero-padded: keys whose pre
	// differ compare as their pre do, without reading the keys.
	pre uint64
	// off and n locate the decoded key: in the input (s[off:off+n], when the
	// key has no escape and is valid UTF-8, so decoding changes nothing) or
	// in the arena.
	off, n  int32
	pos     int32 // offset of the key's opening quote
	val     int32 // offset of the member's value
	inArena bool
}

// object is an object of the input, recorded for the emit pass of
// Canonical.
type object struct {
	start, end int32 // offsets of '{' and just after '}'
	mem, n     int32 // its members, sorted by key: mems[mem:mem+n]
}

// parser is a strict JSON (RFC 8259) reader: it accepts exactly what
// json.Valid accepts, minus repeated keys and what Limits refuse. With
// record set, it keeps every object's members sorted by key for the emit
// pass of Canonical.
//
// Methods take the offset to read at and return the offset after what they
// read, so that the hot loops work on locals.
type parser struct {
	s []byte

	maxDepth, maxStr, maxNum int
	fold                     bool
	syntaxOnly               bool // check syntax only, as json.Valid

	keys  []keyRef // keys of the open objects, innermost last
	arena []byte   // decoded keys of the open objects that need decoding

	table   []int32 // hash table of a large object's keys (Check)
	scratch []byte  // a folded key being hashed

	record bool
	objs   []object // every object, in order of their opening brace
	mems   []keyRef // members of the closed objects

	top  [MaxMembers][4]int32 // CheckMembers: the top-level object's first members
	ntop int                  // the top-level object's members seen
}

// seed keys the hash of object keys: it is random per process, so inputs
// cannot be made to collide.
var seed = maphash.MakeSeed()

// parsers recycles parsers and their stacks, so that Check allocates
// nothing for ordinary input.
var parsers = sync.Pool{New: func() any { return new(parser) }}

// maxPooled bounds the stacks a pooled parser keeps, so that one huge input
// does not pin its memory.
const maxPooled = 1 << 12

func getParser(b []byte, lim Limits) *parser {
	p := parsers.Get().(*parser)
	p.s = b
	p.maxDepth, p.maxStr, p.maxNum, p.fold = lim.depth(), lim.MaxStringBytes, lim.MaxNumberBytes, lim.FoldCase
	return p
}

func putParser(p *parser) {
	if cap(p.keys) > maxPooled || cap(p.mems) > maxPooled || cap(p.objs) > maxPooled || cap(p.table) > 2*maxPooled ||
		cap(p.arena) > maxPooled*16 || cap(p.scratch) > maxPooled*16 {
		return
	}
	*p = parser{keys: p.keys[:0], arena: p.arena[:0], objs: p.objs[:0], mems: p.mems[:0], table: p.table[:0], scratch: p.scratch[:0]}
	parsers.Put(p)
}

func syntaxAt(i int, msg string) error {
	return &SyntaxError{Offset: int64(i), msg: msg}
}

// run reads the whole input: one value and surrounding whitespace. A
// syntax error anywhere wins over a repeated key or a limit found earlier,
// so that the kind of error does not depend on where the problems are.
func (p *parser) run() error {
	err := p.parse()
	if err == nil {
		return nil
	}
	if _, ok := err.(*SyntaxError); ok {
		return err
	}
	q := getParser(p.s, Limits{MaxDepth: maxJSONDepth})
	q.syntaxOnly = true
	serr := q.parse()
	putParser(q)
	if serr != nil {
		return serr
	}
	return err
}

func (p *parser) parse() error {
	s := p.s
	if len(s) > maxInput {
		return &LimitError{Offset: 0, Limit: "input", Max: maxInput}
	}
	i := skipWS(s, 0)
	i, err := p.value(i, 0)
	if err != nil {
		return err
	}
	if i = skipWS(s, i); i != len(s) {
		return syntaxAt(i, "data after the top-level value")
	}
	return nil
}

var isWS = [256]bool{' ': true, '\t': true, '\n': true, '\r': true}

func skipWS(s []byte, i int) int {
	for i < len(s) && isWS[s[i]] {
		i++
	}
	return i
}

// value reads the value at i (whitespace already skipped) inside a
// container at the given depth.
func (p *parser) value(i, depth int) (int, error) {
	s := p.s
	if i >= len(s) {
		return i, syntaxAt(i, "unexpected end of input")
	}
	switch s[i] {
	case '{':
		return p.object(i, depth+1)
	case '[':
		return p.array(i, depth+1)
	case '"':
		i, _, err := p.str(i, &valueSafe)
		return i, err
	case 't':
		return literal(s, i, "true")
	case 'f':
		return literal(s, i, "false")
	case 'n':
		return literal(s, i, "null")
	}
	return p.number(i)
}

func literal(s []byte, i int, lit string) (int, error) {
	if len(s)-i >= len(lit) && string(s[i:i+len(lit)]) == lit {
		return i + len(lit), nil
	}
	// Point at the first byte that differs, as encoding/json does.
	for j := 0; j < len(lit) && i < len(s) && s[i] == lit[j]; j++ {
		i++
	}
	if i == len(s) {
		return i, syntaxAt(i, "unexpected end of input")
	}
	return i, syntaxAt(i, "invalid literal")
}

// number reads a number: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (p *parser) number(i int) (int, error) {
	s := p.s
	start := i
	if s[i] == '-' {
		i++
	}
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case i < len(s) && s[i] >= '1' && s[i] <= '9':
		i++
		for i < len(s) && isDigit(s[i]) {
			i++
		}
	case i == len(s):
		return i, syntaxAt(i, "unexpected end of input")
	default:
		return i, syntaxAt(i, "invalid character, want a value")
	}
	if i < len(s) && s[i] == '.' {
		i++
		if i == len(s) || !isDigit(s[i]) {
			return i, syntaxAt(i, "want a digit after the decimal point")
		}
		for i < len(s) && isDigit(s[i]) {
			i++
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if i == len(s) || !isDigit(s[i]) {
			return i, syntaxAt(i, "want a digit in the exponent")
		}
		for i < len(s) && isDigit(s[i]) {
			i++
		}
	}
	if p.maxNum > 0 && i-start > p.maxNum {
		return start, &LimitError{Offset: int64(start), Limit: "number", Max: p.maxNum}
	}
	return i, nil
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// valueSafe marks the bytes a string value may hold without a closer look:
// everything but controls, '"' and '\\'. keySafe also leaves out non-ASCII
// bytes, whose UTF-8 validity decides whether a key needs decoding.
var valueSafe, keySafe = func() (v, k [256]bool) {
	for c := 0x20; c < 256; c++ {
		v[c] = c != '"' && c != '\\'
		k[c] = v[c] && c < utf8.RuneSelf
	}
	return v, k
}()

// String properties found by str.
const (
	escaped  = 1 << iota // holds an escape or (with keySafe) invalid UTF-8
	nonASCII             // holds a non-ASCII byte (only with keySafe)
)

// str reads the string whose opening quote is at i.
func (p *parser) str(i int, safe *[256]bool) (end int, flags int, err error) {
	s := p.s
	start := i
	i++
	ascii := safe == &keySafe
	for {
		// Eight bytes at a time: skip them, or jump to the first one that
		// needs a closer look.
		for i+8 <= len(s) {
			m := special8(binary.LittleEndian.Uint64(s[i:]), ascii)
			if m != 0 {
				i += bits.TrailingZeros64(m) >> 3
				break
			}
			i += 8
		}
		for i < len(s) && safe[s[i]] {
			i++
		}
		if i >= len(s) {
			return i, 0, syntaxAt(i, "unexpected end of input")
		}
		switch c := s[i]; {
		case c == '"':
			if p.maxStr > 0 && i-start-1 > p.maxStr {
				return start, 0, &LimitError{Offset: int64(start), Limit: "string", Max: p.maxStr}
			}
			return i + 1, flags, nil
		case c == '\\':
			flags |= escaped
			if i+1 >= len(s) {
				return i + 1, 0, syntaxAt(i+1, "unexpected end of input")
			}
			switch s[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				for j := i + 2; j < i+6; j++ {
					if j >= len(s) {
						return j, 0, syntaxAt(j, "unexpected end of input")
					}
					if !isHex(s[j]) {
						return j, 0, syntaxAt(j, "invalid \\u escape")
					}
				}
				i += 6
			default:
				return i + 1, 0, syntaxAt(i+1, "invalid escape")
			}
		case c < 0x20:
			return i, 0, syntaxAt(i, "control character in string")
		default: // non-ASCII in a key
			flags |= nonASCII
			r, size := utf8.DecodeRune(s[i:])
			if r == utf8.RuneError && size == 1 {
				flags |= escaped
			}
			i += size
		}
	}
}

// special8 flags the bytes of the little-endian word x that are a control,
// '"' or '\\' (or, with ascii, non-ASCII) with their high bit, by the
// classic SWAR tests: a byte below n is flagged by (x - n) &^ x & 0x80. A
// borrow can flag a byte above one truly flagged, never below, so the
// lowest flag is exact.
func special8(x uint64, ascii bool) uint64 {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	bad := (x - 0x20*ones) &^ x                      // a byte below 0x20
	bad |= (x ^ '"'*ones - ones) &^ (x ^ '"'*ones)   // a '"'
	bad |= (x ^ '\\'*ones - ones) &^ (x ^ '\\'*ones) // a '\\'
	if ascii {
		bad |= x
	}
	return bad & highs
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// key reads the object key whose opening quote is at i into k.
func (p *parser) key(i int, k *keyRef) (int, error) {
	end, flags, err := p.str(i, &keySafe)
	if err != nil {
		return end, err
	}
	k.pos = int32(i)
	var kb []byte
	if flags&escaped == 0 {
		k.off, k.n = int32(i+1), int32(end-i-2)
		kb = p.s[i+1 : end-1]
	} else {
		off := len(p.arena)
		p.arena = appendDecoded(p.arena, p.s[i+1:end-1])
		k.off, k.n, k.inArena = int32(off), int32(len(p.arena)-off), true
		kb = p.arena[off:]
		flags &^= nonASCII
		for _, c := range kb {
			if c >= utf8.RuneSelf {
				flags |= nonASCII
				break
			}
		}
	}
	k.pre = prefix(kb, p.fold, flags&nonASCII != 0)
	return end, nil
}

// prefix returns the first 8 bytes of k, folded as encoding/json folds
// names with fold, as a big-endian integer padded with zeros.
func prefix(k []byte, fold, nonASCII bool) uint64 {
	var buf [8 + utf8.UTFMax]byte
	n := 0
	switch {
	case !fold:
		n = copy(buf[:8], k)
	case !nonASCII:
		for ; n < 8 && n < len(k); n++ {
			buf[n] = upper(k[n])
		}
	default:
		for i := 0; n < 8 && i < len(k); {
			r, size := utf8.DecodeRune(k[i:])
			i += size
			n += utf8.EncodeRune(buf[n:], foldRune(r))
		}
	}
	return binary.BigEndian.Uint64(buf[:8])
}

func upper(c byte) byte {
	if 'a' <= c && c <= 'z' {
		c -= 'a' - 'A'
	}
	return c
}

// keyBytes returns the decoded key k.
func (p *parser) keyBytes(k *keyRef) []byte {
	if k.inArena {
		return p.arena[k.off : k.off+k.n]
	}
	return p.s[k.off : k.off+k.n]
}

// tooDeep is the error for a container at i nested deeper than allowed.
func (p *parser) tooDeep(i int) error {
	if p.syntaxOnly {
		return syntaxAt(i, "exceeded max depth")
	}
	return &LimitError{Offset: int64(i), Limit: "depth", Max: p.maxDepth}
}

func (p *parser) array(i, depth int) (int, error) {
	if depth > p.maxDepth {
		return i, p.tooDeep(i)
	}
	s := p.s
	i = skipWS(s, i+1)
	if i < len(s) && s[i] == ']' {
		return i + 1, nil
	}
	for {
		var err error
		if i, err = p.value(i, depth); err != nil {
			return i, err
		}
		i = skipWS(s, i)
		if i >= len(s) {
			return i, syntaxAt(i, "unexpected end of input")
		}
		switch s[i] {
		case ',':
			i = skipWS(s, i+1)
		case ']':
			return i + 1, nil
		default:
			return i, syntaxAt(i, "want , or ] after an array element")
		}
	}
}

func (p *parser) object(i, depth int) (int, error) {
	if depth > p.maxDepth {
		return i, p.tooDeep(i)
	}
	s := p.s
	oi := len(p.objs)
	if p.record {
		p.objs = append(p.objs, object{start: int32(i)})
	}
	base, abase := len(p.keys), len(p.arena)
	i = skipWS(s, i+1)
	if i < len(s) && s[i] == '}' {
		i++
	} else {
		for {
			if i >= len(s) {
				return i, syntaxAt(i, "unexpected end of input")
			}
			if s[i] != '"' {
				return i, syntaxAt(i, "want a string as object key")
			}
			if p.syntaxOnly {
				end, _, err := p.str(i, &valueSafe)
				if err != nil {
					return end, err
				}
				if i = skipWS(s, end); i >= len(s) || s[i] != ':' {
					if i >= len(s) {
						return i, syntaxAt(i, "unexpected end of input")
					}
					return i, syntaxAt(i, "want : after object key")
				}
				if i, err = p.value(skipWS(s, i+1), depth); err != nil {
					return i, err
				}
				if i = skipWS(s, i); i >= len(s) {
					return i, syntaxAt(i, "unexpected end of input")
				}
				if c := s[i]; c == ',' {
					i = skipWS(s, i+1)
					continue
				} else if c != '}' {
					return i, syntaxAt(i, "want , or } after an object member")
				}
				i++
				break
			}
			p.keys = append(p.keys, keyRef{})
			n := len(p.keys) - 1
			end, err := p.key(i, &p.keys[n])
			if err != nil {
				return end, err
			}
			if n-base < smallObject && !p.record {
				if err := p.dupAmong(p.keys[base:n], &p.keys[n]); err != nil {
					return i, err
				}
			}
			i = skipWS(s, end)
			if i >= len(s) {
				return i, syntaxAt(i, "unexpected end of input")
			}
			if s[i] != ':' {
				return i, syntaxAt(i, "want : after object key")
			}
			i = skipWS(s, i+1)
			p.keys[n].val = int32(i)
			if i, err = p.value(i, depth); err != nil {
				return i, err
			}
			if depth == 1 {
				if p.ntop < len(p.top) {
					p.top[p.ntop] = [4]int32{p.keys[n].pos, int32(end), p.keys[n].val, int32(i)}
				}
				p.ntop++
			}
			i = skipWS(s, i)
			if i >= len(s) {
				return i, syntaxAt(i, "unexpected end of input")
			}
			if c := s[i]; c == ',' {
				i = skipWS(s, i+1)
				continue
			} else if c != '}' {
				return i, syntaxAt(i, "want , or } after an object member")
			}
			i++
			break
		}
	}
	ks := p.keys[base:]
	switch {
	case p.record:
		if err := p.sortKeys(ks); err != nil {
			return i, err
		}
	case len(ks) > smallObject:
		if err := p.dupHash(ks); err != nil {
			return i, err
		}
	}
	if p.record {
		o := &p.objs[oi]
		o.end, o.mem, o.n = int32(i), int32(len(p.mems)), int32(len(ks))
		p.mems = append(p.mems, ks...)
	}
	p.keys, p.arena = p.keys[:base], p.arena[:abase]
	return i, nil
}

// dupAmong reports k if it repeats one of the keys ks.
func (p *parser) dupAmong(ks []keyRef, k *keyRef) error {
	var kb []byte
	for j := range ks {
		o := &ks[j]
		if o.pre != k.pre || o.n != k.n && !p.fold {
			continue
		}
		if kb == nil {
			kb = p.keyBytes(k)
		}
		ob := p.keyBytes(o)
		if bytes.Equal(kb, ob) {
			return &DuplicateKeyError{Offset: int64(k.pos), Key: boundKey(kb)}
		}
		if p.fold && bytes.EqualFold(kb, ob) {
			return &DuplicateKeyError{Offset: int64(k.pos), Key: boundKey(kb), Folded: true}
		}
	}
	return nil
}

// dupHash reports the first key of ks (in input order) that repeats an
// earlier one, with a hash table: expected O(1) per key.
func (p *parser) dupHash(ks []keyRef) error {
	size := 1
	for size < 2*len(ks) {
		size <<= 1
	}
	tab := slices.Grow(p.table[:0], size)[:size]
	for j := range tab {
		tab[j] = -1
	}
	p.table = tab
	mask := uint64(size - 1)
	for j := range ks {
		k := &ks[j]
		kb := p.keyBytes(k)
		var h uint64
		if p.fold {
			p.scratch = appendFolded(p.scratch[:0], kb)
			h = maphash.Bytes(seed, p.scratch)
		} else {
			h = maphash.Bytes(seed, kb)
		}
		for slot := h & mask; ; slot = (slot + 1) & mask {
			t := tab[slot]
			if t < 0 {
				tab[slot] = int32(j)
				break
			}
			o := &ks[t]
			if o.pre != k.pre || o.n != k.n && !p.fold {
				continue
			}
			ob := p.keyBytes(o)
			if bytes.Equal(kb, ob) {
				return &DuplicateKeyError{Offset: int64(k.pos), Key: boundKey(kb)}
			}
			if p.fold && bytes.EqualFold(kb, ob) {
				return &DuplicateKeyError{Offset: int64(k.pos), Key: boundKey(kb), Folded: true}
			}
		}
	}
	return nil
}

// sortKeys sorts the keys of one object by bytes (for Canonical) and
// reports a repeated key: of the pairs of equal keys, the one whose later
// key comes first in the input.
func (p *parser) sortKeys(ks []keyRef) error {
	cmp := func(a, b keyRef) int {
		if a.pre != b.pre {
			if a.pre < b.pre {
				return -1
			}
			return 1
		}
		return bytes.Compare(p.keyBytes(&a), p.keyBytes(&b))
	}
	slices.SortFunc(ks, cmp)
	var dup *DuplicateKeyError
	for j := 1; j < len(ks); j++ {
		if cmp(ks[j-1], ks[j]) != 0 {
			continue
		}
		a, b := ks[j-1], ks[j]
		if a.pos > b.pos {
			a, b = b, a
		}
		if dup == nil || int64(b.pos) < dup.Offset {
			kb := p.keyBytes(&b)
			dup = &DuplicateKeyError{Offset: int64(b.pos), Key: boundKey(kb), Folded: !bytes.Equal(kb, p.keyBytes(&a))}
		}
	}
	if dup != nil {
		return dup
	}
	return nil
}
