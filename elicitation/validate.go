package elicitation

import (
	"encoding/json"
	"fmt"
	"math"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// FieldError reports a problem with one property: a value that fails
// [Schema.Validate], or a property that cannot be built or parsed. Field is
// the property name and Reason a short human-readable explanation.
type FieldError struct {
	Field  string
	Reason string
}

// Error returns `elicitation: field "<Field>": <Reason>`.
func (e *FieldError) Error() string {
	return fmt.Sprintf("elicitation: field %q: %s", e.Field, e.Reason)
}

// Validate checks the content of an accepted answer against the schema and
// returns the first problem as a *FieldError, or nil. Properties are
// checked in schema order, then content keys not defined by the schema are
// rejected (in sorted order). A nil value counts as absent. Checks: required
// properties are present; strings are strings whose length in runes lies in
// [minLength, maxLength], that match the pattern and the format; numbers
// are Go numbers (any int, uint or float kind, or json.Number), finite,
// integral for integer properties, and within [minimum, maximum]; booleans
// are bools; single selects are one of the enum values; multi-selects are
// []string or []any of strings, every item one of the values, with a
// count within [minItems, maxItems]. If the schema has a construction
// error, that error is returned.
func (s *Schema) Validate(content map[string]any) error {
	if err := s.Err(); err != nil {
		return err
	}
	for _, p := range s.props {
		v, ok := content[p.name]
		if !ok || v == nil {
			if p.required {
				return &FieldError{p.name, "is required"}
			}
			continue
		}
		if reason := p.check(v); reason != "" {
			return &FieldError{p.name, reason}
		}
	}
	var unknown []string
	for k := range content {
		if _, ok := s.index[k]; !ok {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return &FieldError{unknown[0], "is not defined in the schema"}
	}
	return nil
}

// check returns why v is not a valid value for p, or "".
func (p *property) check(v any) string {
	switch p.kind {
	case kString:
		str, ok := v.(string)
		if !ok {
			return "must be a string"
		}
		n := utf8.RuneCountInString(str)
		switch {
		case p.minLength != nil && n < *p.minLength:
			return fmt.Sprintf("must be at least %d characters", *p.minLength)
		case p.maxLength != nil && n > *p.maxLength:
			return fmt.Sprintf("must be at most %d characters", *p.maxLength)
		case p.re != nil && !p.re.MatchString(str):
			return fmt.Sprintf("must match pattern %q", p.pattern)
		}
		return checkFormat(p.format, str)
	case kNumber, kInteger:
		f, integral, ok := toNumber(v)
		switch {
		case p.kind == kInteger && !(ok && integral):
			return "must be an integer"
		case !ok:
			return "must be a number"
		case p.minimum != nil && f < *p.minimum:
			return "must be at least " + formatFloat(*p.minimum)
		case p.maximum != nil && f > *p.maximum:
			return "must be at most " + formatFloat(*p.maximum)
		}
	case kBoolean:
		if _, ok := v.(bool); !ok {
			return "must be a boolean"
		}
	case kEnum, kTitledEnum, kLegacyEnum:
		str, ok := v.(string)
		if !ok {
			return "must be a string"
		}
		if !p.valueSet[str] {
			return "must be one of " + quoteList(p.values)
		}
	case kMultiEnum, kTitledMultiEnum:
		items, ok := toStrings(v)
		if !ok {
			return "must be an array of strings"
		}
		switch {
		case p.minItems != nil && len(items) < *p.minItems:
			return fmt.Sprintf("must have at least %d items", *p.minItems)
		case p.maxItems != nil && len(items) > *p.maxItems:
			return fmt.Sprintf("must have at most %d items", *p.maxItems)
		}
		for _, it := range items {
			if !p.valueSet[it] {
				return fmt.Sprintf("item %q must be one of %s", it, quoteList(p.values))
			}
		}
	}
	return ""
}

func checkFormat(f StringFormat, s string) string {
	switch f {
	case FormatEmail:
		local, domain, _ := strings.Cut(s, "@")
		if strings.Count(s, "@") != 1 || local == "" || domain == "" {
			return "must be an email address"
		}
	case FormatURI:
		if u, err := url.Parse(s); err != nil || u.Scheme == "" {
			return "must be a URI with a scheme"
		}
	case FormatDate:
		if _, err := time.Parse(time.DateOnly, s); err != nil {
			return "must be a date (YYYY-MM-DD)"
		}
	case FormatDateTime:
		if _, err := time.Parse(time.RFC3339, s); err != nil {
			return "must be an RFC 3339 date-time"
		}
	}
	return ""
}

// toNumber converts any Go number or json.Number to float64, reporting
// whether it is integral; NaN, infinities and non-numbers are not ok.
func toNumber(v any) (f float64, integral, ok bool) {
	switch n := v.(type) {
	case int:
		return float64(n), true, true
	case int8:
		return float64(n), true, true
	case int16:
		return float64(n), true, true
	case int32:
		return float64(n), true, true
	case int64:
		return float64(n), true, true
	case uint:
		return float64(n), true, true
	case uint8:
		return float64(n), true, true
	case uint16:
		return float64(n), true, true
	case uint32:
		return float64(n), true, true
	case uint64:
		return float64(n), true, true
	case float32:
		f = float64(n)
	case float64:
		f = n
	case json.Number:
		if i, err := strconv.ParseInt(string(n), 10, 64); err == nil {
			return float64(i), true, true
		}
		var err error
		if f, err = strconv.ParseFloat(string(n), 64); err != nil {
			return 0, false, false
		}
	default:
		return 0, false, false
	}
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, false, false
	}
	return f, f == math.Trunc(f), true
}

// toStrings accepts a []string or a []any holding only strings.
func toStrings(v any) ([]string, bool) {
	switch a := v.(type) {
	case []string:
		return a, true
	case []any:
		out := make([]string, len(a))
		for i, e := range a {
			s, ok := e.(string)
			if !ok {
				return nil, false
			}
			out[i] = s
		}
		return out, true
	}
	return nil, false
}

func formatFloat(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

func quoteList(values []string) string {
	q := make([]string, len(values))
	for i, v := range values {
		q[i] = strconv.Quote(v)
	}
	return strings.Join(q, ", ")
}
