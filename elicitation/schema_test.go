package elicitation

import (
	"errors"
	"math"
	"strings"
	"testing"
)

var opts = []Option{{Value: "value1", Title: "First Option"}, {Value: "value2", Title: "Second Option"}}

func TestMarshalKinds(t *testing.T) {
	tests := []struct {
		name   string
		schema *Schema
		want   string
	}{
		{"empty", NewSchema(), `{"type":"object","properties":{}}`},
		{"zero value", &Schema{}, `{"type":"object","properties":{}}`},
		{"string", NewSchema().String("name", Title("Name"), Description("Your name"), Required(), MinLength(1), MaxLength(50), Pattern("^[A-Z]"), Default("John Doe")),
			`{"type":"object","properties":{"name":{"type":"string","title":"Name","description":"Your name","minLength":1,"maxLength":50,"pattern":"^[A-Z]","default":"John Doe"}},"required":["name"]}`},
		{"formats", NewSchema().String("e", Format(FormatEmail)).String("u", Format(FormatURI)).String("d", Format(FormatDate)).String("t", Format(FormatDateTime)),
			`{"type":"object","properties":{"e":{"type":"string","format":"email"},"u":{"type":"string","format":"uri"},"d":{"type":"string","format":"date"},"t":{"type":"string","format":"date-time"}}}`},
		{"number", NewSchema().Number("score", Minimum(0), Maximum(100.5), Default(95.5)),
			`{"type":"object","properties":{"score":{"type":"number","minimum":0,"maximum":100.5,"default":95.5}}}`},
		{"integer", NewSchema().Integer("age", Title("Age"), Minimum(0), Maximum(150), Default(30), Required()),
			`{"type":"object","properties":{"age":{"type":"integer","title":"Age","minimum":0,"maximum":150,"default":30}},"required":["age"]}`},
		{"boolean", NewSchema().Boolean("ok", Title("OK?"), Default(true)),
			`{"type":"object","properties":{"ok":{"type":"boolean","title":"OK?","default":true}}}`},
		{"enum", NewSchema().Enum("color", []string{"Red", "Green"}, Title("Color"), Default("Green")),
			`{"type":"object","properties":{"color":{"type":"string","title":"Color","enum":["Red","Green"],"default":"Green"}}}`},
		{"titled enum", NewSchema().TitledEnum("x", opts, Default("value2")),
			`{"type":"object","properties":{"x":{"type":"string","oneOf":[{"const":"value1","title":"First Option"},{"const":"value2","title":"Second Option"}],"default":"value2"}}}`},
		{"legacy enum", NewSchema().LegacyEnum("x", []string{"a", "b"}, []string{"A", "B"}),
			`{"type":"object","properties":{"x":{"type":"string","enum":["a","b"],"enumNames":["A","B"]}}}`},
		{"multi enum", NewSchema().MultiEnum("m", []string{"a", "b", "c"}, MinItems(1), MaxItems(2), Default([]string{"a"})),
			`{"type":"object","properties":{"m":{"type":"array","items":{"type":"string","enum":["a","b","c"]},"minItems":1,"maxItems":2,"default":["a"]}}}`},
		{"titled multi enum", NewSchema().TitledMultiEnum("m", opts, Default([]any{"value1"})),
			`{"type":"object","properties":{"m":{"type":"array","items":{"anyOf":[{"const":"value1","title":"First Option"},{"const":"value2","title":"Second Option"}]},"default":["value1"]}}}`},
		{"order kept", NewSchema().Boolean("z").String("a", Required()).Integer("m", Required()),
			`{"type":"object","properties":{"z":{"type":"boolean"},"a":{"type":"string"},"m":{"type":"integer"}},"required":["a","m"]}`},
		{"confirm", Confirm("confirm", "Delete everything?"),
			`{"type":"object","properties":{"confirm":{"type":"boolean","title":"Delete everything?","default":false}},"required":["confirm"]}`},
		{"type to confirm", TypeToConfirm("repo", `Type "acme/web" to delete it`, "acme/web"),
			`{"type":"object","properties":{"repo":{"type":"string","title":"Type \"acme/web\" to delete it"}},"required":["repo"]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.schema.Err(); err != nil {
				t.Fatalf("Err() = %v", err)
			}
			if got, want := marshal(t, tt.schema), compact(t, tt.want); got != want {
				t.Errorf("got  %s\nwant %s", got, want)
			}
		})
	}
}

func TestBuildErrors(t *testing.T) {
	tests := []struct {
		name   string
		schema *Schema
		field  string
		reason string
	}{
		{"empty name", NewSchema().String(""), "", "property name must not be empty"},
		{"duplicate", NewSchema().String("a").Boolean("a"), "a", "duplicate property name"},
		{"minLength on boolean", NewSchema().Boolean("b", MinLength(1)), "b", "minLength is not allowed for boolean properties"},
		{"pattern on enum", NewSchema().Enum("e", []string{"x"}, Pattern("x")), "e", "pattern is not allowed for enum properties"},
		{"minimum on string", NewSchema().String("s", Minimum(1)), "s", "minimum is not allowed for string properties"},
		{"minItems on enum", NewSchema().Enum("e", []string{"x"}, MinItems(1)), "e", "minItems is not allowed for enum properties"},
		{"format on number", NewSchema().Number("n", Format(FormatEmail)), "n", "format is not allowed for number properties"},
		{"negative length", NewSchema().String("s", MaxLength(-1)), "s", "maxLength must not be negative"},
		{"bad format", NewSchema().String("s", Format("phone")), "s", `unsupported format "phone"`},
		{"bad pattern", NewSchema().String("s", Pattern("(")), "s", "invalid pattern"},
		{"infinite bound", NewSchema().Number("n", Maximum(inf())), "n", "maximum must be finite"},
		{"min > max length", NewSchema().String("s", MinLength(3), MaxLength(2)), "s", "minLength is greater than maxLength"},
		{"min > max", NewSchema().Integer("i", Minimum(3), Maximum(2)), "i", "minimum is greater than maximum"},
		{"minItems > maxItems", NewSchema().MultiEnum("m", []string{"a", "b"}, MinItems(2), MaxItems(1)), "m", "minItems is greater than maxItems"},
		{"minItems > options", NewSchema().MultiEnum("m", []string{"a"}, MinItems(2)), "m", "minItems is greater than the number of options"},
		{"empty enum", NewSchema().Enum("e", nil), "e", "enum must not be empty"},
		{"empty titled enum", NewSchema().TitledEnum("e", nil), "e", "enum must not be empty"},
		{"duplicate enum", NewSchema().MultiEnum("e", []string{"a", "a"}), "e", `duplicate enum value "a"`},
		{"empty option title", NewSchema().TitledEnum("e", []Option{{Value: "a"}}), "e", `option "a" has an empty title`},
		{"legacy length", NewSchema().LegacyEnum("e", []string{"a", "b"}, []string{"A"}), "e", "enumNames has 1 entries but enum has 2"},
		{"default type", NewSchema().Integer("age", Default("30")), "age", "default must be an integer"},
		{"default not integral", NewSchema().Integer("age", Default(30.5)), "age", "default must be an integer"},
		{"default bound", NewSchema().Integer("age", Minimum(40), Default(30)), "age", "default must be at least 40"},
		{"default length", NewSchema().String("s", MaxLength(2), Default("abc")), "s", "default must be at most 2 characters"},
		{"default enum", NewSchema().Enum("e", []string{"a"}, Default("b")), "e", `default must be one of "a"`},
		{"default multi", NewSchema().MultiEnum("m", []string{"a"}, Default([]string{"b"})), "m", `default item "b" must be one of "a"`},
		{"default null", NewSchema().Boolean("b", Default(nil)), "b", "default must not be null"},
		{"empty expected", TypeToConfirm("x", "Type it", ""), "x", "expected confirmation text must not be empty"},
		{"first error wins", NewSchema().String("a", MinItems(1)).String("a"), "a", "minItems is not allowed for string properties"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.schema.Err()
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("Err() = %v, want *FieldError", err)
			}
			if fe.Field != tt.field || !strings.HasPrefix(fe.Reason, tt.reason) {
				t.Errorf("got field %q reason %q, want %q %q", fe.Field, fe.Reason, tt.field, tt.reason)
			}
			if _, err := tt.schema.MarshalJSON(); err == nil {
				t.Error("MarshalJSON succeeded on an invalid schema")
			}
			if err := tt.schema.Validate(nil); err != tt.schema.Err() {
				t.Errorf("Validate = %v, want construction error", err)
			}
		})
	}
}

func TestNilSchema(t *testing.T) {
	var s *Schema
	if s.Err() == nil || s.Validate(nil) == nil {
		t.Error("nil schema reported no error")
	}
	if _, err := s.MarshalJSON(); err == nil {
		t.Error("MarshalJSON on nil schema succeeded")
	}
	if s.Names() != nil {
		t.Error("Names on nil schema not nil")
	}
}

func TestNames(t *testing.T) {
	got := strings.Join(NewSchema().Number("b").String("a").Names(), ",")
	if got != "b,a" {
		t.Errorf("Names() = %s", got)
	}
}

func TestFieldErrorMessage(t *testing.T) {
	err := error(&FieldError{Field: "age", Reason: "must be an integer"})
	if got := err.Error(); got != `elicitation: field "age": must be an integer` {
		t.Errorf("Error() = %s", got)
	}
}

func inf() float64 { return math.Inf(1) }
