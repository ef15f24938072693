package elicitation

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
)

// Action is the user's response to an elicitation request.
type Action string

// The actions defined by MCP.
const (
	Accept  Action = "accept"  // the user submitted the form; Content holds the answer
	Decline Action = "decline" // the user explicitly refused
	Cancel  Action = "cancel"  // the user dismissed the request without choosing
)

// Result is the client's answer to "elicitation/create". Content is only
// present when Action is [Accept].
type Result struct {
	Action  Action         `json:"action"`
	Content map[string]any `json:"content,omitempty"`
}

// ParseResult decodes an "elicitation/create" result. It rejects a missing
// or unknown action, a content that is not a JSON object, content on a
// decline or cancel, and content values other than string, number, bool,
// null or array of strings. Other members (such as "_meta") are ignored.
//
// Numbers are decoded exactly: an integer literal that fits in an int64
// becomes an int64, any other number a float64. Arrays become []string.
// An accept without content yields a nil Content.
func ParseResult(raw []byte) (Result, error) {
	var wire struct {
		Action  *Action         `json:"action"`
		Content json.RawMessage `json:"content"`
	}
	if err := json.Unmarshal(raw, &wire); err != nil {
		return Result{}, fmt.Errorf("elicitation: invalid result: %w", err)
	}
	if wire.Action == nil {
		return Result{}, errors.New("elicitation: result has no action")
	}
	r := Result{Action: *wire.Action}
	switch r.Action {
	case Accept, Decline, Cancel:
	default:
		return Result{}, fmt.Errorf("elicitation: unknown action %q", r.Action)
	}
	content := bytes.TrimSpace(wire.Content)
	if len(content) == 0 || string(content) == "null" {
		return r, nil
	}
	if r.Action != Accept {
		return Result{}, fmt.Errorf("elicitation: content is not allowed with action %q", r.Action)
	}
	dec := json.NewDecoder(bytes.NewReader(content))
	dec.UseNumber()
	if err := dec.Decode(&r.Content); err != nil {
		return Result{}, errors.New("elicitation: content must be a JSON object")
	}
	for k, v := range r.Content {
		nv, ok := normalize(v)
		if !ok {
			return Result{}, &FieldError{k, "must be a string, number, boolean or array of strings"}
		}
		r.Content[k] = nv
	}
	return r, nil
}

// Confirmed reports whether the human accepted, the content is valid for s
// (see [Schema.Validate]), and content[field] equals expected. Strings and
// bools compare with ==, numbers by value whatever their Go type, and
// string slices element by element. Use it with the schemas built by
// [Confirm] (expected true) and [TypeToConfirm] (expected the text).
func (r Result) Confirmed(s *Schema, field string, expected any) bool {
	if r.Action != Accept || s.Validate(r.Content) != nil {
		return false
	}
	got, ok := r.Content[field]
	return ok && sameValue(got, expected)
}

func sameValue(a, b any) bool {
	if fa, _, ok := toNumber(a); ok {
		fb, _, ok := toNumber(b)
		return ok && fa == fb
	}
	if sa, ok := toStrings(a); ok {
		sb, ok := toStrings(b)
		return ok && slices.Equal(sa, sb)
	}
	switch a.(type) {
	case string, bool:
		return a == b
	}
	return false
}

// Confirm returns a schema with one required boolean property,
// {"type":"boolean","title":title,"default":false}. The human confirms by
// ticking it; check with r.Confirmed(s, field, true).
func Confirm(field, title string) *Schema {
	return NewSchema().Boolean(field, Title(title), Required(), Default(false))
}

// TypeToConfirm returns a schema with one required string property titled
// title that the human must fill in with exactly expected (for example a
// repository name before deleting it); check with
// r.Confirmed(s, field, expected). The expected text is not put in the
// schema, so say in the title what to type. An empty expected is a
// construction error.
func TypeToConfirm(field, title, expected string) *Schema {
	s := NewSchema().String(field, Title(title), Required())
	if expected == "" {
		s.fail(field, "expected confirmation text must not be empty")
	}
	return s
}
