package elicitation

import (
	"encoding/json"
	"errors"
	"math"
	"testing"
)

func formSchema() *Schema {
	return NewSchema().
		String("name", Required(), MinLength(2), MaxLength(5)).
		String("code", Pattern("^[A-Z]{3}$")).
		String("email", Format(FormatEmail)).
		String("site", Format(FormatURI)).
		String("day", Format(FormatDate)).
		String("at", Format(FormatDateTime)).
		Integer("age", Minimum(0), Maximum(150)).
		Number("score", Minimum(0.5), Maximum(99.5)).
		Boolean("ok").
		Enum("status", []string{"active", "inactive"}).
		TitledEnum("level", []Option{{"lo", "Low"}, {"hi", "High"}}).
		LegacyEnum("color", []string{"r", "g"}, []string{"Red", "Green"}).
		MultiEnum("tags", []string{"a", "b", "c"}, MinItems(1), MaxItems(2)).
		TitledMultiEnum("picks", []Option{{"x", "X"}, {"y", "Y"}})
}

func TestValidateOK(t *testing.T) {
	s := formSchema()
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		content map[string]any
	}{
		{"only required", map[string]any{"name": "Al"}},
		{"runes not bytes", map[string]any{"name": "日本語です"}},
		{"null optional", map[string]any{"name": "Al", "age": nil}},
		{"everything", map[string]any{
			"name": "Alice", "code": "ABC", "email": "a@b.example", "site": "https://example.com/x",
			"day": "2025-11-25", "at": "2025-11-25T10:00:00+01:00", "age": int64(0), "score": 99.5,
			"ok": false, "status": "inactive", "level": "hi", "color": "g",
			"tags": []string{"a", "c"}, "picks": []any{"y"},
		}},
		{"integer as integral float", map[string]any{"name": "Al", "age": 150.0}},
		{"integer as json.Number", map[string]any{"name": "Al", "age": json.Number("42"), "score": json.Number("1e1")}},
		{"other int kinds", map[string]any{"name": "Al", "age": uint8(7), "score": int32(3)}},
		{"empty optional multi ok without minItems", map[string]any{"name": "Al", "picks": []string{}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := s.Validate(tt.content); err != nil {
				t.Errorf("Validate: %v", err)
			}
		})
	}
}

func TestValidateErrors(t *testing.T) {
	s := formSchema()
	tests := []struct {
		name   string
		field  string
		value  any
		reason string
	}{
		{"missing required", "name", nil, "is required"},
		{"string type", "name", 12, "must be a string"},
		{"too short", "name", "A", "must be at least 2 characters"},
		{"too long", "name", "Alexander", "must be at most 5 characters"},
		{"pattern", "code", "abc", `must match pattern "^[A-Z]{3}$"`},
		{"email no at", "email", "ab.example", "must be an email address"},
		{"email two ats", "email", "a@b@c", "must be an email address"},
		{"email empty local", "email", "@b", "must be an email address"},
		{"uri no scheme", "site", "example.com", "must be a URI with a scheme"},
		{"uri unparsable", "site", "http://[::1", "must be a URI with a scheme"},
		{"date", "day", "25/11/2025", "must be a date (YYYY-MM-DD)"},
		{"date-time", "at", "2025-11-25 10:00", "must be an RFC 3339 date-time"},
		{"integer type", "age", "30", "must be an integer"},
		{"integer fraction", "age", 30.5, "must be an integer"},
		{"integer fraction json.Number", "age", json.Number("30.5"), "must be an integer"},
		{"integer min", "age", -1, "must be at least 0"},
		{"integer max", "age", int64(151), "must be at most 150"},
		{"number type", "score", true, "must be a number"},
		{"number NaN", "score", math.NaN(), "must be a number"},
		{"number min", "score", 0.25, "must be at least 0.5"},
		{"number max", "score", float32(100), "must be at most 99.5"},
		{"boolean type", "ok", "true", "must be a boolean"},
		{"enum type", "status", 1, "must be a string"},
		{"enum member", "status", "pending", `must be one of "active", "inactive"`},
		{"titled enum member", "level", "High", `must be one of "lo", "hi"`},
		{"legacy enum member", "color", "Red", `must be one of "r", "g"`},
		{"multi type", "tags", "a", "must be an array of strings"},
		{"multi item type", "tags", []any{"a", 1}, "must be an array of strings"},
		{"multi min items", "tags", []string{}, "must have at least 1 items"},
		{"multi max items", "tags", []string{"a", "b", "c"}, "must have at most 2 items"},
		{"multi member", "tags", []string{"d"}, `item "d" must be one of "a", "b", "c"`},
		{"titled multi member", "picks", []string{"X"}, `item "X" must be one of "x", "y"`},
		{"unknown field", "extra", "x", "is not defined in the schema"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			content := map[string]any{"name": "Al"}
			if tt.value == nil {
				delete(content, tt.field)
			} else {
				content[tt.field] = tt.value
			}
			err := s.Validate(content)
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("Validate = %v, want *FieldError", err)
			}
			if fe.Field != tt.field || fe.Reason != tt.reason {
				t.Errorf("got %q %q, want %q %q", fe.Field, fe.Reason, tt.field, tt.reason)
			}
		})
	}
}

func TestValidateNilContent(t *testing.T) {
	if err := NewSchema().String("a").Validate(nil); err != nil {
		t.Errorf("optional-only schema rejected nil content: %v", err)
	}
	if err := Confirm("ok", "OK?").Validate(nil); err == nil || err.Error() != `elicitation: field "ok": is required` {
		t.Errorf("Validate(nil) = %v", err)
	}
}

func TestValidateUnknownFieldsSorted(t *testing.T) {
	err := NewSchema().Validate(map[string]any{"b": 1, "a": 2})
	if err == nil || err.Error() != `elicitation: field "a": is not defined in the schema` {
		t.Errorf("Validate = %v", err)
	}
}
