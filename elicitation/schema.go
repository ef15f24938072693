package elicitation

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
)

// Schema is an ordered, flat form-mode elicitation schema (the
// requestedSchema of an "elicitation/create" request).
//
// Build one with [NewSchema] and the chained property methods, or read one
// with [Parse]. Builder methods never panic: the first construction problem
// (empty or duplicate property name, option not meaningful for the property
// kind, empty or duplicate enum, invalid pattern, default not matching the
// property) is recorded, the offending property is not added, and it is
// reported by [Schema.Err], [Schema.MarshalJSON] and [Schema.Validate].
// The zero value is an empty schema ready to use. A Schema is not safe for
// concurrent modification, but once built it may be marshalled and used for
// validation from several goroutines.
type Schema struct {
	props []*property
	index map[string]int
	err   error
}

// Option is one choice of a titled enum: Value is the machine value sent
// back by the client (the JSON "const") and Title is the label shown to the
// human. It marshals as {"const":Value,"title":Title}.
type Option struct {
	Value string `json:"const"`
	Title string `json:"title"`
}

// StringFormat is a value of the "format" keyword of a string property.
type StringFormat string

// The string formats allowed by form mode.
const (
	FormatEmail    StringFormat = "email"     // one "@" with non-empty parts on both sides
	FormatURI      StringFormat = "uri"       // parsed by net/url with a non-empty scheme
	FormatDate     StringFormat = "date"      // 2006-01-02
	FormatDateTime StringFormat = "date-time" // RFC 3339
)

var errNilSchema = errors.New("elicitation: nil schema")

type kind int

const (
	kString kind = iota
	kNumber
	kInteger
	kBoolean
	kEnum
	kTitledEnum
	kLegacyEnum
	kMultiEnum
	kTitledMultiEnum
)

var kindNames = [...]string{"string", "number", "integer", "boolean", "enum", "titled enum", "legacy enum", "multi-select enum", "titled multi-select enum"}

func (k kind) String() string { return kindNames[k] }

func (k kind) jsonType() string {
	switch k {
	case kNumber, kInteger, kBoolean:
		return k.String()
	case kMultiEnum, kTitledMultiEnum:
		return "array"
	}
	return "string"
}

func (k kind) multi() bool { return k == kMultiEnum || k == kTitledMultiEnum }

type property struct {
	name                 string
	kind                 kind
	title, description   string
	required             bool
	minLength, maxLength *int
	pattern              string
	re                   *regexp.Regexp
	format               StringFormat
	minimum, maximum     *float64
	minItems, maxItems   *int
	values               []string // enum values or option consts
	valueSet             map[string]bool
	titles               []string // option titles or enumNames
	def                  any
	hasDef               bool
}

// NewSchema returns an empty schema.
func NewSchema() *Schema { return &Schema{} }

// String adds a string property. Meaningful options: Title, Description,
// Required, Default (a string), MinLength, MaxLength, Pattern and Format.
func (s *Schema) String(name string, opts ...FieldOption) *Schema {
	return s.add(name, kString, nil, nil, opts)
}

// Number adds a number property. Meaningful options: Title, Description,
// Required, Default (any Go number), Minimum and Maximum.
func (s *Schema) Number(name string, opts ...FieldOption) *Schema {
	return s.add(name, kNumber, nil, nil, opts)
}

// Integer adds an integer property; values and the default must be
// integral. Meaningful options are those of [Schema.Number].
func (s *Schema) Integer(name string, opts ...FieldOption) *Schema {
	return s.add(name, kInteger, nil, nil, opts)
}

// Boolean adds a boolean property. Meaningful options: Title, Description,
// Required and Default (a bool).
func (s *Schema) Boolean(name string, opts ...FieldOption) *Schema {
	return s.add(name, kBoolean, nil, nil, opts)
}

// Enum adds an untitled single-select property
// {"type":"string","enum":values}. values must be non-empty and distinct.
// Meaningful options: Title, Description, Required and Default (one of
// values).
func (s *Schema) Enum(name string, values []string, opts ...FieldOption) *Schema {
	return s.add(name, kEnum, values, nil, opts)
}

// TitledEnum adds a titled single-select property
// {"type":"string","oneOf":[{"const":…,"title":…},…]}. options must be
// non-empty, with distinct values and non-empty titles. Meaningful
// options are those of [Schema.Enum].
func (s *Schema) TitledEnum(name string, options []Option, opts ...FieldOption) *Schema {
	v, t := splitOptions(options)
	return s.add(name, kTitledEnum, v, t, opts)
}

// LegacyEnum adds a deprecated titled single-select property
// {"type":"string","enum":values,"enumNames":names}; names must have the
// same length as values. Prefer [Schema.TitledEnum] for new code.
// Meaningful options are those of [Schema.Enum].
func (s *Schema) LegacyEnum(name string, values, names []string, opts ...FieldOption) *Schema {
	return s.add(name, kLegacyEnum, values, names, opts)
}

// MultiEnum adds an untitled multi-select property
// {"type":"array","items":{"type":"string","enum":values}}. Meaningful
// options: Title, Description, Required, Default (a []string of values),
// MinItems and MaxItems.
func (s *Schema) MultiEnum(name string, values []string, opts ...FieldOption) *Schema {
	return s.add(name, kMultiEnum, values, nil, opts)
}

// TitledMultiEnum adds a titled multi-select property
// {"type":"array","items":{"anyOf":[{"const":…,"title":…},…]}}. Meaningful
// options are those of [Schema.MultiEnum].
func (s *Schema) TitledMultiEnum(name string, options []Option, opts ...FieldOption) *Schema {
	v, t := splitOptions(options)
	return s.add(name, kTitledMultiEnum, v, t, opts)
}

// Err returns the first construction error, or nil. Errors about a
// property are *FieldError values naming it.
func (s *Schema) Err() error {
	if s == nil {
		return errNilSchema
	}
	return s.err
}

// Names returns the property names in insertion order.
func (s *Schema) Names() []string {
	if s == nil {
		return nil
	}
	names := make([]string, len(s.props))
	for i, p := range s.props {
		names[i] = p.name
	}
	return names
}

func splitOptions(options []Option) (values, titles []string) {
	values = make([]string, len(options))
	titles = make([]string, len(options))
	for i, o := range options {
		values[i], titles[i] = o.Value, o.Title
	}
	return values, titles
}

func (s *Schema) fail(field, reason string) {
	if s.err == nil {
		s.err = &FieldError{Field: field, Reason: reason}
	}
}

func (s *Schema) add(name string, k kind, values, titles []string, opts []FieldOption) *Schema {
	if s.index == nil {
		s.index = make(map[string]int)
	}
	if name == "" {
		s.fail(name, "property name must not be empty")
		return s
	}
	if _, dup := s.index[name]; dup {
		s.fail(name, "duplicate property name")
		return s
	}
	p := &property{name: name, kind: k, values: append([]string(nil), values...), titles: append([]string(nil), titles...)}
	if err := p.init(opts); err != nil {
		s.fail(name, err.Error())
		return s
	}
	s.index[name] = len(s.props)
	s.props = append(s.props, p)
	return s
}

func (p *property) init(opts []FieldOption) error {
	if p.kind >= kEnum {
		if len(p.values) == 0 {
			return errors.New("enum must not be empty")
		}
		seen := make(map[string]bool, len(p.values))
		for i, v := range p.values {
			if seen[v] {
				return fmt.Errorf("duplicate enum value %q", v)
			}
			seen[v] = true
			if (p.kind == kTitledEnum || p.kind == kTitledMultiEnum) && p.titles[i] == "" {
				return fmt.Errorf("option %q has an empty title", v)
			}
		}
		if p.kind == kLegacyEnum && len(p.titles) != len(p.values) {
			return fmt.Errorf("enumNames has %d entries but enum has %d", len(p.titles), len(p.values))
		}
		p.valueSet = seen
	}
	for _, o := range opts {
		if o.apply == nil {
			continue
		}
		if err := o.apply(p); err != nil {
			return err
		}
	}
	switch {
	case p.minLength != nil && p.maxLength != nil && *p.minLength > *p.maxLength:
		return errors.New("minLength is greater than maxLength")
	case p.minimum != nil && p.maximum != nil && *p.minimum > *p.maximum:
		return errors.New("minimum is greater than maximum")
	case p.minItems != nil && p.maxItems != nil && *p.minItems > *p.maxItems:
		return errors.New("minItems is greater than maxItems")
	case p.minItems != nil && *p.minItems > len(p.values):
		return errors.New("minItems is greater than the number of options")
	}
	if p.hasDef {
		if p.def == nil {
			return errors.New("default must not be null")
		}
		if reason := p.check(p.def); reason != "" {
			return errors.New("default " + reason)
		}
		if p.kind.multi() {
			p.def, _ = toStrings(p.def) // store []any defaults as []string
		}
	}
	return nil
}

// FieldOption configures one property. The zero FieldOption does nothing.
// Applying an option to a property kind it is not meaningful for records a
// construction error on the schema.
type FieldOption struct {
	apply func(*property) error
}

func allow(p *property, keyword string, kinds ...kind) error {
	for _, k := range kinds {
		if p.kind == k {
			return nil
		}
	}
	return fmt.Errorf("%s is not allowed for %s properties", keyword, p.kind)
}

// Title sets the human-readable label of a property (any kind).
func Title(title string) FieldOption {
	return FieldOption{func(p *property) error { p.title = title; return nil }}
}

// Description sets the help text of a property (any kind).
func Description(desc string) FieldOption {
	return FieldOption{func(p *property) error { p.description = desc; return nil }}
}

// Required lists the property in the schema's "required" array (any kind).
func Required() FieldOption {
	return FieldOption{func(p *property) error { p.required = true; return nil }}
}

// Default sets the value the client pre-fills (any kind). It must be valid
// for the property itself: a string for strings and single selects (one of
// the values), a bool for booleans, a Go number (int, float64, json.Number,
// …) for numbers and an integral one for integers, a []string (or []any of
// strings) of allowed values for multi-selects, and it must satisfy the
// property's length, pattern, format, bound and item-count constraints.
func Default(v any) FieldOption {
	return FieldOption{func(p *property) error { p.def, p.hasDef = v, true; return nil }}
}

func count(keyword string, n int, kinds []kind, set func(*property) **int) FieldOption {
	return FieldOption{func(p *property) error {
		if err := allow(p, keyword, kinds...); err != nil {
			return err
		}
		if n < 0 {
			return fmt.Errorf("%s must not be negative", keyword)
		}
		*set(p) = &n
		return nil
	}}
}

// MinLength sets the minimum length, in runes, of a string property.
func MinLength(n int) FieldOption {
	return count("minLength", n, []kind{kString}, func(p *property) **int { return &p.minLength })
}

// MaxLength sets the maximum length, in runes, of a string property.
func MaxLength(n int) FieldOption {
	return count("maxLength", n, []kind{kString}, func(p *property) **int { return &p.maxLength })
}

// MinItems sets the minimum number of selections of a multi-select property.
func MinItems(n int) FieldOption {
	return count("minItems", n, []kind{kMultiEnum, kTitledMultiEnum}, func(p *property) **int { return &p.minItems })
}

// MaxItems sets the maximum number of selections of a multi-select property.
func MaxItems(n int) FieldOption {
	return count("maxItems", n, []kind{kMultiEnum, kTitledMultiEnum}, func(p *property) **int { return &p.maxItems })
}

// Pattern sets a regular expression a string property must match somewhere
// (unanchored, as in JSON Schema; use ^…$ to match the whole value). It is
// compiled with Go's regexp package (RE2 syntax); an invalid expression is
// a construction error.
func Pattern(expr string) FieldOption {
	return FieldOption{func(p *property) error {
		if err := allow(p, "pattern", kString); err != nil {
			return err
		}
		re, err := regexp.Compile(expr)
		if err != nil {
			return fmt.Errorf("invalid pattern: %v", err)
		}
		p.pattern, p.re = expr, re
		return nil
	}}
}

// Format sets the format of a string property; only [FormatEmail],
// [FormatURI], [FormatDate] and [FormatDateTime] are accepted.
func Format(f StringFormat) FieldOption {
	return FieldOption{func(p *property) error {
		if err := allow(p, "format", kString); err != nil {
			return err
		}
		switch f {
		case FormatEmail, FormatURI, FormatDate, FormatDateTime:
			p.format = f
			return nil
		}
		return fmt.Errorf("unsupported format %q", f)
	}}
}

func bound(keyword string, v float64, set func(*property) **float64) FieldOption {
	return FieldOption{func(p *property) error {
		if err := allow(p, keyword, kNumber, kInteger); err != nil {
			return err
		}
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("%s must be finite", keyword)
		}
		*set(p) = &v
		return nil
	}}
}

// Minimum sets the inclusive lower bound of a number or integer property.
func Minimum(v float64) FieldOption {
	return bound("minimum", v, func(p *property) **float64 { return &p.minimum })
}

// Maximum sets the inclusive upper bound of a number or integer property.
func Maximum(v float64) FieldOption {
	return bound("maximum", v, func(p *property) **float64 { return &p.maximum })
}

// MarshalJSON encodes the schema as
// {"type":"object","properties":{…},"required":[…]} with properties in
// insertion order and "required" (in property order) omitted when empty.
// Within a property, keywords appear as type, title, description, the
// kind-specific keywords, then default; empty titles and descriptions are
// omitted. It returns the construction error, if any, instead of encoding
// an invalid schema.
func (s *Schema) MarshalJSON() ([]byte, error) {
	if err := s.Err(); err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.WriteString(`{"type":"object","properties":{`)
	var required []string
	for i, p := range s.props {
		if i > 0 {
			b.WriteByte(',')
		}
		if err := writeMembers(&b, []member{{p.name, p}}, false); err != nil {
			return nil, err
		}
		if p.required {
			required = append(required, p.name)
		}
	}
	b.WriteByte('}')
	if len(required) > 0 {
		b.WriteByte(',')
		if err := writeMembers(&b, []member{{"required", required}}, false); err != nil {
			return nil, err
		}
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// UnmarshalJSON replaces s with the schema parsed by [Parse].
func (s *Schema) UnmarshalJSON(data []byte) error {
	parsed, err := Parse(data)
	if err != nil {
		return err
	}
	*s = *parsed
	return nil
}

type member struct {
	key   string
	value any
}

// writeMembers writes key:value pairs in order, optionally wrapped in braces.
func writeMembers(b *bytes.Buffer, ms []member, braces bool) error {
	if braces {
		b.WriteByte('{')
	}
	for i, m := range ms {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(m.key)
		b.Write(k)
		b.WriteByte(':')
		if p, ok := m.value.(*property); ok {
			if err := p.writeJSON(b); err != nil {
				return err
			}
			continue
		}
		v, err := json.Marshal(m.value)
		if err != nil {
			return fmt.Errorf("elicitation: encoding %q: %w", m.key, err)
		}
		b.Write(v)
	}
	if braces {
		b.WriteByte('}')
	}
	return nil
}

func (p *property) writeJSON(b *bytes.Buffer) error {
	ms := []member{{"type", p.kind.jsonType()}}
	add := func(key string, v any, ok bool) {
		if ok {
			ms = append(ms, member{key, v})
		}
	}
	add("title", p.title, p.title != "")
	add("description", p.description, p.description != "")
	add("minLength", p.minLength, p.minLength != nil)
	add("maxLength", p.maxLength, p.maxLength != nil)
	add("pattern", p.pattern, p.re != nil)
	add("format", p.format, p.format != "")
	add("minimum", p.minimum, p.minimum != nil)
	add("maximum", p.maximum, p.maximum != nil)
	switch p.kind {
	case kEnum:
		add("enum", p.values, true)
	case kLegacyEnum:
		add("enum", p.values, true)
		add("enumNames", p.titles, true)
	case kTitledEnum:
		add("oneOf", p.options(), true)
	case kMultiEnum:
		add("items", struct {
			Type string   `json:"type"`
			Enum []string `json:"enum"`
		}{"string", p.values}, true)
	case kTitledMultiEnum:
		add("items", struct {
			AnyOf []Option `json:"anyOf"`
		}{p.options()}, true)
	}
	add("minItems", p.minItems, p.minItems != nil)
	add("maxItems", p.maxItems, p.maxItems != nil)
	add("default", p.def, p.hasDef)
	return writeMembers(b, ms, true)
}

func (p *property) options() []Option {
	opts := make([]Option, len(p.values))
	for i := range p.values {
		opts[i] = Option{Value: p.values[i], Title: p.titles[i]}
	}
	return opts
}
