// Package canon reads JSON from clients strictly and gives each value one
// canonical form, so that what a human is shown, what a token is bound to
// and what a tool runs with are the same value.
//
//   - [Check] validates a whole message body in one pass: valid JSON exactly
//     as encoding/json accepts it, no object with a repeated key, nesting
//     and sizes within [Limits].
//   - [Canonical] and [Digest] give a value's canonical encoding and its
//     SHA-256.
//   - [Describe] renders a value for a human within a budget, eliding long
//     values inside themselves with visible markers, never dropping a key.
//
// # Cost
//
// Every function runs in time linear in its input with a small constant;
// Canonical and Describe also sort each object's keys, O(k log k)
// comparisons for an object of k keys. No value is copied once per level
// of nesting, and nothing is converted to binary numbers: exponents of any
// length are compared and rewritten as decimal digits. Check allocates
// nothing once warm: its stacks and tables are pooled. Every function is
// safe for concurrent use.
//
// # Duplicate keys
//
// Parsers disagree on which of two equal keys wins (encoding/json keeps the
// last, others the first or refuse), so a value with a repeated key has no
// single meaning: it is refused everywhere, at any depth. Keys are compared
// after decoding, as encoding/json decodes them: escapes resolved, invalid
// UTF-8 and lone surrogates replaced by U+FFFD, so "a" and "\u0061" are one
// key, and so are two keys made of one invalid byte each (0xff, 0xfe).
//
// encoding/json also matches object keys to struct fields ignoring case
// (Unicode simple folding), so {"id":1,"ID":2} decoded into a struct with an
// ID field keeps 2, although the keys differ. Such keys are refused only
// with [Limits].FoldCase: they are legitimate in maps (HTTP headers,
// environment variables), and they are never hidden, because the canonical
// form and [Describe] keep and show both.
package canon

import (
	"errors"
	"strconv"
	"unicode/utf8"
)

// DefaultMaxDepth is the nesting depth Limits allow when MaxDepth is zero.
//
// Every reader of the value (this package, encoding/json, the JSON Schema
// validator, the host's own code) recurses once per level, so depth bounds
// their stacks; with linear parsing it no longer bounds CPU. 128 is far
// beyond what a tool's arguments or an MCP message need (the JSON-RPC
// envelope takes three levels) and keeps every reader's recursion shallow.
const DefaultMaxDepth = 128

// maxJSONDepth is encoding/json's own nesting limit: json.Valid refuses
// deeper input, so Check never accepts more.
const maxJSONDepth = 10000

// Limits bound what Check and AppendCanonical accept. The zero value, which
// Canonical, Digest and Describe apply, allows nesting up to
// DefaultMaxDepth, refuses keys equal after decoding, and bounds no string
// or number (the body size does).
type Limits struct {
	// MaxDepth is the deepest nesting of arrays and objects accepted: [] is
	// depth 1, [[]] depth 2. If zero (or negative), DefaultMaxDepth is used;
	// values above 10000, encoding/json's own limit, count as 10000.
	MaxDepth int
	// MaxStringBytes bounds each string literal, key or value, in bytes as
	// written between its quotes. Zero means no bound.
	MaxStringBytes int
	// MaxNumberBytes bounds each number literal, in bytes. Zero means no
	// bound.
	MaxNumberBytes int
	// FoldCase also refuses two keys of one object that are equal ignoring
	// case as encoding/json matches keys to struct fields (Unicode simple
	// folding, as bytes.EqualFold), such as "id" and "ID". If false, only
	// keys that are equal after decoding are refused.
	FoldCase bool
}

func (l Limits) depth() int {
	switch {
	case l.MaxDepth <= 0:
		return DefaultMaxDepth
	case l.MaxDepth > maxJSONDepth:
		return maxJSONDepth
	}
	return l.MaxDepth
}

// maxInput is the largest input accepted: offsets are kept in 32 bits.
const maxInput = 1<<31 - 1

// Check reports whether b is exactly one JSON value (surrounded by optional
// whitespace) that encoding/json accepts, holds no object with a repeated
// key at any depth (see the package documentation; with lim.FoldCase, no
// keys equal ignoring case either), and stays within lim. Empty input is a
// syntax error, as for json.Valid.
//
// The error is a *SyntaxError, a *DuplicateKeyError or a *LimitError; a
// syntax error anywhere in b wins over the others, so the kind does not
// depend on where the problems are. Check runs in one pass, in time linear
// in len(b): the keys of an object of up to 16 keys are compared pairwise,
// a larger object's go into a hash table keyed by a per-process random
// seed. It allocates nothing once warm (its stacks are pooled). It is safe
// for concurrent use.
func Check(b []byte, lim Limits) error {
	p := getParser(b, lim)
	err := p.run()
	putParser(p)
	return err
}

// MaxMembers is the most members CheckMembers locates.
const MaxMembers = 8

// CheckMembers is Check that also locates the members of a top-level
// object, as it reads them anyway: the first min(len(dst), MaxMembers)
// members go to dst, in input order, each as the offsets of its key (from
// its opening quote to just after its closing one) and of its value, start
// and end; n counts every member (0 when the top-level value is not an
// object). dst is valid only when err is nil. It saves its callers a
// second walk of the input to find the members.
func CheckMembers(b []byte, lim Limits, dst [][4]int32) (n int, err error) {
	p := getParser(b, lim)
	err = p.run()
	n = p.ntop
	copy(dst, p.top[:min(n, MaxMembers)])
	putParser(p)
	return n, err
}

// SyntaxError reports input that is not valid JSON.
type SyntaxError struct {
	// Offset is the byte offset in the input at which the problem was
	// found.
	Offset int64
	msg    string
}

func (e *SyntaxError) Error() string {
	return "canon: invalid JSON at offset " + strconv.FormatInt(e.Offset, 10) + ": " + e.msg
}

// DuplicateKeyError reports an object that holds one key twice.
type DuplicateKeyError struct {
	// Offset is the byte offset of the later of the two keys.
	Offset int64
	// Key is the repeated key as decoded, cut to at most MaxErrorKeyBytes
	// bytes at a rune boundary with "…" appended when longer.
	Key string
	// Folded reports keys that differ, but are equal ignoring case
	// (Limits.FoldCase); Key is then the later one.
	Folded bool
}

// MaxErrorKeyBytes bounds the key quoted in a DuplicateKeyError.
const MaxErrorKeyBytes = 64

func (e *DuplicateKeyError) Error() string {
	if e.Folded {
		return "canon: key " + strconv.Quote(e.Key) + " at offset " + strconv.FormatInt(e.Offset, 10) +
			" repeats another key of its object ignoring case"
	}
	return "canon: duplicate key " + strconv.Quote(e.Key) + " at offset " + strconv.FormatInt(e.Offset, 10)
}

// LimitError reports input beyond one of the Limits.
type LimitError struct {
	// Offset is the byte offset of the value that is too deep or too long.
	Offset int64
	// Limit names the limit: "depth", "string", "number" or "input".
	Limit string
	// Max is the limit's value: a depth, or a length in bytes.
	Max int
}

func (e *LimitError) Error() string {
	var what string
	switch e.Limit {
	case "depth":
		what = "nested deeper than " + strconv.Itoa(e.Max)
	case "input":
		what = "input longer than " + strconv.Itoa(e.Max) + " bytes"
	default:
		what = e.Limit + " longer than " + strconv.Itoa(e.Max) + " bytes"
	}
	return "canon: at offset " + strconv.FormatInt(e.Offset, 10) + ": " + what
}

// ErrTooLong is returned (wrapped) by Describe when the value cannot be
// shown within the budget even with every long value elided: the rendering
// of the keys that must be shown alone exceeds it.
var ErrTooLong = errors.New("canon: the value cannot be shown within the budget")

// boundKey cuts a decoded key for an error message.
func boundKey(k []byte) string {
	if len(k) <= MaxErrorKeyBytes {
		return string(k)
	}
	cut := MaxErrorKeyBytes
	for cut > 0 && !utf8.RuneStart(k[cut]) {
		cut--
	}
	return string(k[:cut]) + "…"
}
