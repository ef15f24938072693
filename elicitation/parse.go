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

// parseProperty parses the schema of property name and adds it to s.
func (s *Schema) parseProperty(name string, raw json.RawMessage) error {
	p := &propSource{name: name}
	if err := json.Unmarshal(raw, &p.m); err != nil || p.m == nil {
		return p.fail("schema must be a JSON object")
	}
	var typ string
	if err := json.Unmarshal(p.m["type"], &typ); err != nil {
		return p.fail("type must be a string")
	}
	p.used = map[string]bool{"type": true}
	sh, err := p.shape(typ)
	if err != nil {
		return err
	}
	opts, err := p.options(sh.k)
	if err != nil {
		return err
	}
	s.addParsed(name, sh, opts)
	return s.err
}

// propSource is the JSON object of one property being parsed, and which of
// its keywords have been read.
type propSource struct {
	name string
	m    map[string]json.RawMessage
	used map[string]bool
}

// fail returns a *FieldError for the property.
func (p *propSource) fail(format string, args ...any) error {
	return &FieldError{p.name, fmt.Sprintf(format, args...)}
}

// use decodes keyword key into dst, if the property has it, and marks it
// read. It reports whether the property had it.
func (p *propSource) use(key string, dst any) (bool, error) {
	r, ok := p.m[key]
	if !ok {
		return false, nil
	}
	p.used[key] = true
	if err := json.Unmarshal(r, dst); err != nil {
		return true, p.fail("invalid %s: %v", key, err)
	}
	return true, nil
}

// shape is what a property's type and enum keywords make it: its kind,
// and the values, titles or options of an enum.
type shape struct {
	k       kind
	values  []string
	titles  []string
	options []Option
}

// shape reads the keywords that decide the kind of a property of type typ.
func (p *propSource) shape(typ string) (shape, error) {
	switch typ {
	case "string":
		return p.stringShape()
	case "number":
		return shape{k: kNumber}, nil
	case "integer":
		return shape{k: kInteger}, nil
	case "boolean":
		return shape{k: kBoolean}, nil
	case "array":
		return p.arrayShape()
	case "object":
		return shape{}, p.fail("nested objects are not allowed in form mode")
	default:
		return shape{}, p.fail("unsupported type %q", typ)
	}
}

// stringShape tells a plain string from the single-select enums: untitled
// (enum), titled (oneOf) and legacy (enum with enumNames).
func (p *propSource) stringShape() (shape, error) {
	var sh shape
	hasEnum, err := p.use("enum", &sh.values)
	if err != nil {
		return sh, err
	}
	rawOneOf, hasOneOf := p.m["oneOf"]
	p.used["oneOf"] = true
	switch {
	case hasEnum && hasOneOf:
		return sh, p.fail("enum and oneOf cannot be combined")
	case hasOneOf:
		sh.k = kTitledEnum
		if sh.options, err = decodeOptions(rawOneOf); err != nil {
			return sh, p.fail("invalid oneOf: %v", err)
		}
	case hasEnum:
		sh.k = kEnum
		if ok, err := p.use("enumNames", &sh.titles); err != nil {
			return sh, err
		} else if ok {
			sh.k = kLegacyEnum
		}
	default:
		sh.k = kString
	}
	return sh, nil
}

// arrayShape accepts only the multi-select enums: items
// {"type":"string","enum":…} (untitled) or {"anyOf":…} (titled).
func (p *propSource) arrayShape() (shape, error) {
	var sh shape
	var items map[string]json.RawMessage
	if ok, err := p.use("items", &items); err != nil {
		return sh, err
	} else if !ok || items == nil {
		return sh, p.fail("arrays must be multi-select enums with items")
	}
	var itemType string
	if t, ok := items["type"]; ok && (json.Unmarshal(t, &itemType) != nil || itemType != "string") {
		return sh, p.fail("array items must be of type string")
	}
	switch {
	case items["enum"] != nil && items["anyOf"] == nil && itemType == "string":
		sh.k = kMultiEnum
		if err := json.Unmarshal(items["enum"], &sh.values); err != nil {
			return sh, p.fail("invalid items enum: %v", err)
		}
	case items["anyOf"] != nil && items["enum"] == nil:
		sh.k = kTitledMultiEnum
		var err error
		if sh.options, err = decodeOptions(items["anyOf"]); err != nil {
			return sh, p.fail("invalid items anyOf: %v", err)
		}
	default:
		return sh, p.fail(`arrays are only allowed as multi-select enums (items {"type":"string","enum":…} or {"anyOf":…})`)
	}
	for key := range items {
		if key != "type" && key != "enum" && key != "anyOf" {
			return sh, p.fail("unsupported keyword %q in items", key)
		}
	}
	return sh, nil
}

// options turns the keywords not read yet into field options, in key
// order; the enum keywords are not allowed for a property of kind k, and
// unknown keywords not at all.
func (p *propSource) options(k kind) ([]FieldOption, error) {
	var opts []FieldOption
	for _, key := range sortedKeys(p.m) {
		if p.used[key] {
			continue
		}
		switch key {
		case "enum", "enumNames", "oneOf", "items":
			return nil, p.fail("%s is not allowed for %s properties", key, k)
		}
		parse, ok := keywordOptions[key]
		if !ok {
			return nil, p.fail("unsupported keyword %q", key)
		}
		opt, err := parse(p.m[key])
		if err != nil {
			return nil, p.fail("invalid %s: %v", key, err)
		}
		opts = append(opts, opt)
	}
	return opts, nil
}

// addParsed adds property name of shape sh to s with the builder method of its
// kind, which checks opts against it.
func (s *Schema) addParsed(name string, sh shape, opts []FieldOption) {
	switch sh.k {
	case kString:
		s.String(name, opts...)
	case kNumber:
		s.Number(name, opts...)
	case kInteger:
		s.Integer(name, opts...)
	case kBoolean:
		s.Boolean(name, opts...)
	case kEnum:
		s.Enum(name, sh.values, opts...)
	case kLegacyEnum:
		s.LegacyEnum(name, sh.values, sh.titles, opts...)
	case kTitledEnum:
		s.TitledEnum(name, sh.options, opts...)
	case kMultiEnum:
		s.MultiEnum(name, sh.values, opts...)
	case kTitledMultiEnum:
		s.TitledMultiEnum(name, sh.options, opts...)
	}
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
