package mcphandler

import (
	"encoding/json"

	"github.com/mcphandler/mcphandler/internal/jsonrpc"
)

// flatSchema is an input schema simple enough to check on the raw
// arguments, without decoding them: an object whose properties each allow
// one or more of the types string, boolean, integer, number and null, some
// of them required, other properties refused or not. NewTool derives such
// a schema from every struct of plain fields.
//
// It is a fast path in front of the full JSON Schema validator, never a
// replacement: accept reports true only for arguments the full validator
// accepts too, and anything it is unsure of (an escaped or non-ASCII key,
// a long number, a value of another type) goes to the full validator,
// which decides and words the error. So a call is accepted or refused
// exactly as before, only cheaper when it is valid.
type flatSchema struct {
	props    []flatProp // at most 64, so that seen fits a uint64
	required uint64     // bit i: props[i] is required
	closed   bool       // additionalProperties: false
}

type flatProp struct {
	name  string
	types uint8 // flatString | flatBoolean | ...
}

const (
	flatString uint8 = 1 << iota
	flatBoolean
	flatInteger
	flatNumber
	flatNull
)

// maxFlatNumber is the longest number literal accept reads itself: short
// enough that no float64 overflows and every integer is exact.
const maxFlatNumber = 15

var flatTypes = map[string]uint8{"string": flatString, "boolean": flatBoolean, "integer": flatInteger, "number": flatNumber, "null": flatNull}

// compileFlat returns the flatSchema of an input schema, or nil when the
// schema uses anything else (any keyword but type, properties, required,
// additionalProperties, description and title; nested types; more than 64
// properties), so that every call is checked by the full validator.
func compileFlat(raw json.RawMessage) *flatSchema {
	var top struct {
		Type                 string                     `json:"type"`
		Properties           map[string]json.RawMessage `json:"properties"`
		Required             []string                   `json:"required"`
		AdditionalProperties *bool                      `json:"additionalProperties"`
	}
	if !onlyKeys(raw, "type", "properties", "required", "additionalProperties", "description", "title") ||
		json.Unmarshal(raw, &top) != nil || top.Type != "object" || len(top.Properties) > 64 {
		return nil
	}
	f := &flatSchema{closed: top.AdditionalProperties != nil && !*top.AdditionalProperties}
	for name, ps := range top.Properties {
		t, ok := flatPropTypes(ps)
		if !ok || !plainKey(name) {
			return nil
		}
		f.props = append(f.props, flatProp{name: name, types: t})
	}
	for _, name := range top.Required {
		i := f.index([]byte(name))
		if i < 0 {
			return nil // required but not described: leave it to the validator
		}
		f.required |= 1 << i
	}
	return f
}

// flatPropTypes returns the types a property schema allows, false when it
// says more than its type(s), description and title.
func flatPropTypes(ps json.RawMessage) (uint8, bool) {
	if !onlyKeys(ps, "type", "description", "title") {
		return 0, false
	}
	var p struct {
		Type json.RawMessage `json:"type"`
	}
	if json.Unmarshal(ps, &p) != nil {
		return 0, false
	}
	var names []string
	var one string
	if json.Unmarshal(p.Type, &one) == nil {
		names = []string{one}
	} else if json.Unmarshal(p.Type, &names) != nil || len(names) == 0 {
		return 0, false
	}
	var t uint8
	for _, n := range names {
		b, ok := flatTypes[n]
		if !ok {
			return 0, false
		}
		t |= b
	}
	return t, true
}

// onlyKeys reports whether raw is an object whose keys are all among
// allowed (compared exactly, as JSON Schema does).
func onlyKeys(raw json.RawMessage, allowed ...string) bool {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil || m == nil {
		return false
	}
	for k := range m {
		found := false
		for _, a := range allowed {
			found = found || k == a
		}
		if !found {
			return false
		}
	}
	return true
}

// plainKey reports whether a property name is printable ASCII without a
// quote or backslash: such a name has one spelling in JSON.
func plainKey[T string | []byte](s T) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

func (f *flatSchema) index(name []byte) int {
	for i := range f.props {
		if f.props[i].name == string(name) {
			return i
		}
	}
	return -1
}

// accept reports whether args, a JSON value, surely satisfies the schema.
// False means only "ask the full validator". It does not allocate.
func (f *flatSchema) accept(args []byte) bool {
	var seen uint64
	ok := true
	walked := jsonrpc.Members(args, func(k, v []byte) bool {
		name := k[1 : len(k)-1]
		if !plainKey(name) {
			ok = false // an escaped or non-ASCII key: let the validator decode it
			return false
		}
		i := f.index(name)
		switch {
		case i >= 0:
			ok = flatValue(v, f.props[i].types)
			seen |= 1 << i
		case f.closed:
			ok = false
		default: // any value is allowed, but the validator decodes it first:
			// a nested value or a number may fail there (1e400)
			ok = flatValue(v, flatString|flatBoolean|flatInteger|flatNumber|flatNull)
		}
		return ok
	})
	return walked && ok && len(args) > 0 && args[0] == '{' && seen&f.required == f.required
}

// flatValue reports whether v, a valid JSON value, is surely one of types.
func flatValue(v []byte, types uint8) bool {
	switch c := v[0]; {
	case c == '"':
		return types&flatString != 0
	case c == 't' || c == 'f':
		return types&flatBoolean != 0
	case c == 'n':
		return types&flatNull != 0
	case c != '-' && (c < '0' || c > '9') || len(v) > maxFlatNumber:
		return false // an array, an object, or a number to decode
	}
	integral := true
	for _, c := range v {
		switch c {
		case 'e', 'E':
			return false // an exponent may overflow: let the validator decode it
		case '.':
			integral = false
		}
	}
	if integral {
		return types&(flatInteger|flatNumber) != 0
	}
	return types&flatNumber != 0
}
