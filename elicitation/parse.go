package elicitation

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
)

// Parse reads a requestedSchema and returns it as a [Schema], keeping the
// order of its properties. It accepts exactly the form-mode shapes: a
// top-level {"type":"object","properties":{…},"required":[…]} (an optional
// "$schema" is accepted and dropped), whose properties are strings,
// numbers, integers, booleans, or the single- and multi-select enum shapes
// (untitled "enum", titled "oneOf", legacy "enum"+"enumNames", untitled
// multi-select items {"type":"string","enum":…}, titled multi-select items
// {"anyOf":…}). Nested objects, arrays that are not enum multi-selects,
// unknown types, unknown or misplaced keywords and defaults that do not fit
// their property are rejected with a *FieldError naming the property;
// problems with the top level are plain errors.
func Parse(raw []byte) (*Schema, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(raw, &top); err != nil || top == nil {
		return nil, errors.New("elicitation: schema must be a JSON object")
	}
	for _, k := range sortedKeys(top) {
		switch k {
		case "type", "properties", "required", "$schema":
		default:
			return nil, fmt.Errorf("elicitation: unsupported schema keyword %q", k)
		}
	}
	var typ string
	if json.Unmarshal(top["type"], &typ) != nil || typ != "object" {
		return nil, errors.New(`elicitation: schema type must be "object"`)
	}
	names, props, err := orderedObject(top["properties"])
	if err != nil {
		return nil, fmt.Errorf("elicitation: schema properties: %w", err)
	}
	s := NewSchema()
	for i, name := range names {
		if err := s.parseProperty(name, props[i]); err != nil {
			return nil, err
		}
	}
	if s.err != nil {
		return nil, s.err
	}
	if r, ok := top["required"]; ok {
		var required []string
		if err := json.Unmarshal(r, &required); err != nil {
			return nil, errors.New("elicitation: schema required must be an array of strings")
		}
		for _, name := range required {
			i, ok := s.index[name]
			if !ok {
				return nil, &FieldError{name, "is required but not defined in properties"}
			}
			s.props[i].required = true
		}
	}
	return s, nil
}

// orderedObject splits a JSON object into its keys, in order, and values.
func orderedObject(raw json.RawMessage) ([]string, []json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, nil, errors.New("must be a JSON object")
	}
	var names []string
	var values []json.RawMessage
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, nil, err
		}
		name, _ := tok.(string) // keys of a valid object are strings
		if seen[name] {
			return nil, nil, fmt.Errorf("duplicate property %q", name)
		}
		seen[name] = true
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, nil, err
		}
		names, values = append(names, name), append(values, v)
	}
	return names, values, nil
}

func (s *Schema) parseProperty(name string, raw json.RawMessage) error {
	fail := func(format string, args ...any) error {
		return &FieldError{name, fmt.Sprintf(format, args...)}
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return fail("schema must be a JSON object")
	}
	var typ string
	if err := json.Unmarshal(m["type"], &typ); err != nil {
		return fail("type must be a string")
	}
	used := map[string]bool{"type": true}
	use := func(key string, dst any) (bool, error) {
		r, ok := m[key]
		if !ok {
			return false, nil
		}
		used[key] = true
		if err := json.Unmarshal(r, dst); err != nil {
			return true, fail("invalid %s: %v", key, err)
		}
		return true, nil
	}
	var (
		k       kind
		values  []string
		titles  []string
		options []Option
	)
	switch typ {
	case "string":
		hasEnum, err := use("enum", &values)
		if err != nil {
			return err
		}
		rawOneOf, hasOneOf := m["oneOf"]
		used["oneOf"] = true
		switch {
		case hasEnum && hasOneOf:
			return fail("enum and oneOf cannot be combined")
		case hasOneOf:
			k = kTitledEnum
			if options, err = decodeOptions(rawOneOf); err != nil {
				return fail("invalid oneOf: %v", err)
			}
		case hasEnum:
			k = kEnum
			if ok, err := use("enumNames", &titles); err != nil {
				return err
			} else if ok {
				k = kLegacyEnum
			}
		default:
			k = kString
		}
	case "number":
		k = kNumber
	case "integer":
		k = kInteger
	case "boolean":
		k = kBoolean
	case "array":
		var items map[string]json.RawMessage
		if ok, err := use("items", &items); err != nil {
			return err
		} else if !ok || items == nil {
			return fail("arrays must be multi-select enums with items")
		}
		var itemType string
		if t, ok := items["type"]; ok && (json.Unmarshal(t, &itemType) != nil || itemType != "string") {
			return fail("array items must be of type string")
		}
		switch {
		case items["enum"] != nil && items["anyOf"] == nil && itemType == "string":
			k = kMultiEnum
			if err := json.Unmarshal(items["enum"], &values); err != nil {
				return fail("invalid items enum: %v", err)
			}
		case items["anyOf"] != nil && items["enum"] == nil:
			k = kTitledMultiEnum
			var err error
			if options, err = decodeOptions(items["anyOf"]); err != nil {
				return fail("invalid items anyOf: %v", err)
			}
		default:
			return fail(`arrays are only allowed as multi-select enums (items {"type":"string","enum":…} or {"anyOf":…})`)
		}
		for key := range items {
			if key != "type" && key != "enum" && key != "anyOf" {
				return fail("unsupported keyword %q in items", key)
			}
		}
	case "object":
		return fail("nested objects are not allowed in form mode")
	default:
		return fail("unsupported type %q", typ)
	}
	var opts []FieldOption
	for _, key := range sortedKeys(m) {
		if used[key] {
			continue
		}
		switch key {
		case "enum", "enumNames", "oneOf", "items":
			return fail("%s is not allowed for %s properties", key, k)
		}
		parse, ok := keywordOptions[key]
		if !ok {
			return fail("unsupported keyword %q", key)
		}
		opt, err := parse(m[key])
		if err != nil {
			return fail("invalid %s: %v", key, err)
		}
		opts = append(opts, opt)
	}
	switch k {
	case kString:
		s.String(name, opts...)
	case kNumber:
		s.Number(name, opts...)
	case kInteger:
		s.Integer(name, opts...)
	case kBoolean:
		s.Boolean(name, opts...)
	case kEnum:
		s.Enum(name, values, opts...)
	case kLegacyEnum:
		s.LegacyEnum(name, values, titles, opts...)
	case kTitledEnum:
		s.TitledEnum(name, options, opts...)
	case kMultiEnum:
		s.MultiEnum(name, values, opts...)
	case kTitledMultiEnum:
		s.TitledMultiEnum(name, options, opts...)
	}
	return s.err
}

// keywordOptions maps the generic property keywords to their options; the
// builder rejects the ones not meaningful for the property kind.
var keywordOptions = map[string]func(json.RawMessage) (FieldOption, error){
	"title":       jsonOption(Title),
	"description": jsonOption(Description),
	"pattern":     jsonOption(Pattern),
	"format":      jsonOption(Format),
	"minLength":   jsonOption(MinLength),
	"maxLength":   jsonOption(MaxLength),
	"minItems":    jsonOption(MinItems),
	"maxItems":    jsonOption(MaxItems),
	"minimum":     jsonOption(Minimum),
	"maximum":     jsonOption(Maximum),
	"default": func(raw json.RawMessage) (FieldOption, error) {
		v, err := decodeValue(raw)
		return Default(v), err
	},
}

func jsonOption[T any](option func(T) FieldOption) func(json.RawMessage) (FieldOption, error) {
	return func(raw json.RawMessage) (FieldOption, error) {
		var v T
		if err := json.Unmarshal(raw, &v); err != nil {
			return FieldOption{}, err
		}
		return option(v), nil
	}
}

// decodeOptions decodes an array of exactly {"const":string,"title":string}.
func decodeOptions(raw json.RawMessage) ([]Option, error) {
	var objs []map[string]json.RawMessage
	if err := json.Unmarshal(raw, &objs); err != nil {
		return nil, err
	}
	opts := make([]Option, len(objs))
	for i, o := range objs {
		if len(o) != 2 || json.Unmarshal(o["const"], &opts[i].Value) != nil || json.Unmarshal(o["title"], &opts[i].Title) != nil {
			return nil, fmt.Errorf(`option %d must be {"const":string,"title":string}`, i)
		}
	}
	return opts, nil
}

// decodeValue decodes one JSON value the way [ParseResult] decodes content
// values: integers that fit int64 become int64, other numbers float64,
// arrays of strings []string.
func decodeValue(raw json.RawMessage) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	nv, _ := normalize(v)
	return nv, nil
}

// normalize converts json.Number to int64 (when it is an integer literal
// that fits) or float64, and []any of strings to []string. ok is false for
// values that are not a string, number, bool, null or array of strings.
func normalize(v any) (out any, ok bool) {
	switch x := v.(type) {
	case nil, string, bool:
		return x, true
	case json.Number:
		if i, err := strconv.ParseInt(string(x), 10, 64); err == nil {
			return i, true
		}
		if f, err := strconv.ParseFloat(string(x), 64); err == nil {
			return f, true
		}
		return x, false
	case []any:
		if strs, ok := toStrings(x); ok {
			return strs, true
		}
	}
	return v, false
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
