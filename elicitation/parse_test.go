package elicitation

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

// jsonEqual reports whether a and b hold the same JSON value, ignoring the
// order of object keys.
func jsonEqual(t *testing.T, a, b string) bool {
	t.Helper()
	var va, vb any
	if err := json.Unmarshal([]byte(a), &va); err != nil {
		t.Fatalf("unmarshal %s: %v", a, err)
	}
	if err := json.Unmarshal([]byte(b), &vb); err != nil {
		t.Fatalf("unmarshal %s: %v", b, err)
	}
	return reflect.DeepEqual(va, vb)
}

func wrap(prop string) string {
	return `{"type":"object","properties":{"color":` + prop + `}}`
}

// The five enum shapes of SEP-1330 and the defaults form of SEP-1034.
var roundTrips = []struct {
	name string
	in   string
}{
	{"untitled single select", wrap(`{"type":"string","title":"Color Selection","description":"Choose your favorite color","enum":["Red","Green","Blue"],"default":"Red"}`)},
	{"titled single select", wrap(`{"type":"string","title":"Color Selection","description":"Choose your favorite color","oneOf":[{"const":"#FF0000","title":"Red"},{"const":"#00FF00","title":"Green"},{"const":"#0000FF","title":"Blue"}],"default":"#FF0000"}`)},
	{"legacy titled enum", wrap(`{"type":"string","title":"Color Selection","description":"Choose your favorite color","enum":["#FF0000","#00FF00","#0000FF"],"enumNames":["Red","Green","Blue"],"default":"#FF0000"}`)},
	{"untitled multi select", wrap(`{"type":"array","title":"Color Selection","description":"Choose your favorite colors","items":{"type":"string","enum":["Red","Green","Blue"]},"minItems":1,"maxItems":2,"default":["Red","Green"]}`)},
	{"titled multi select", wrap(`{"type":"array","title":"Color Selection","description":"Choose your favorite colors","items":{"anyOf":[{"const":"#FF0000","title":"Red"},{"const":"#00FF00","title":"Green"},{"const":"#0000FF","title":"Blue"}]},"minItems":1,"maxItems":2,"default":["#FF0000","#00FF00"]}`)},
	{"SEP-1034 defaults", `{"type":"object","properties":{
		"name":{"type":"string","title":"Name","default":"John Doe"},
		"age":{"type":"integer","title":"Age","minimum":0,"maximum":150,"default":30},
		"score":{"type":"number","title":"Score","default":95.5},
		"status":{"type":"string","title":"Status","enum":["active","inactive","pending"],"default":"active"},
		"verified":{"type":"boolean","title":"Verified","default":true}},
		"required":["name","status"]}`},
	{"strings and formats", `{"type":"object","properties":{
		"email":{"type":"string","format":"email","minLength":3,"maxLength":100},
		"site":{"type":"string","format":"uri"},
		"code":{"type":"string","pattern":"^[A-Z]{3}$","default":"ABC"}}}`},
}

func TestParseRoundTrip(t *testing.T) {
	for _, tt := range roundTrips {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Parse([]byte(tt.in))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			out := marshal(t, s)
			if !jsonEqual(t, out, tt.in) {
				t.Errorf("round trip changed the schema:\n in  %s\n out %s", compact(t, tt.in), out)
			}
			again, err := Parse([]byte(out))
			if err != nil {
				t.Fatalf("Parse(MarshalJSON): %v", err)
			}
			if out2 := marshal(t, again); out2 != out {
				t.Errorf("second round trip differs:\n %s\n %s", out, out2)
			}
		})
	}
}

func TestParseDefaultsMatchBuilder(t *testing.T) {
	built := NewSchema().
		String("name", Title("Name"), Required(), Default("John Doe")).
		Integer("age", Title("Age"), Minimum(0), Maximum(150), Default(30)).
		Number("score", Title("Score"), Default(95.5)).
		Enum("status", []string{"active", "inactive", "pending"}, Title("Status"), Required(), Default("active")).
		Boolean("verified", Title("Verified"), Default(true))
	parsed, err := Parse([]byte(roundTrips[5].in))
	if err != nil {
		t.Fatal(err)
	}
	if a, b := marshal(t, built), marshal(t, parsed); a != b {
		t.Errorf("built  %s\nparsed %s", a, b)
	}
	if got := strings.Join(parsed.Names(), ","); got != "name,age,score,status,verified" {
		t.Errorf("order = %s", got)
	}
	if def := parsed.props[1].def; def != int64(30) {
		t.Errorf("age default = %#v, want int64(30)", def)
	}
}

func TestParseSchemaKeywordAndUnmarshal(t *testing.T) {
	in := `{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","properties":{"b":{"type":"boolean"},"a":{"type":"string"}},"required":["a"]}`
	var s Schema
	if err := json.Unmarshal([]byte(in), &s); err != nil {
		t.Fatal(err)
	}
	want := `{"type":"object","properties":{"b":{"type":"boolean"},"a":{"type":"string"}},"required":["a"]}`
	if got := marshal(t, &s); got != want {
		t.Errorf("got %s", got)
	}
	if err := json.Unmarshal([]byte(`{"type":"object","properties":{"o":{"type":"object"}}}`), &s); err == nil {
		t.Error("UnmarshalJSON accepted a nested object")
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name  string
		in    string
		field string // "" for top-level errors
		want  string
	}{
		{"not json", `{`, "", "must be a JSON object"},
		{"null", `null`, "", "must be a JSON object"},
		{"array", `[]`, "", "must be a JSON object"},
		{"not object type", `{"type":"string","properties":{}}`, "", `type must be "object"`},
		{"missing type", `{"properties":{}}`, "", `type must be "object"`},
		{"unknown top keyword", `{"type":"object","properties":{},"additionalProperties":false}`, "", `unsupported schema keyword "additionalProperties"`},
		{"missing properties", `{"type":"object"}`, "", "properties: must be a JSON object"},
		{"properties not object", `{"type":"object","properties":[]}`, "", "properties: must be a JSON object"},
		{"duplicate property", `{"type":"object","properties":{"a":{"type":"string"},"a":{"type":"string"}}}`, "", `duplicate property "a"`},
		{"required not strings", `{"type":"object","properties":{},"required":[1]}`, "", "required must be an array of strings"},
		{"required unknown", `{"type":"object","properties":{},"required":["x"]}`, "x", "is required but not defined"},
		{"property not object", wrap(`true`), "color", "schema must be a JSON object"},
		{"missing property type", wrap(`{"title":"x"}`), "color", "type must be a string"},
		{"nested object", wrap(`{"type":"object","properties":{}}`), "color", "nested objects are not allowed"},
		{"unknown type", wrap(`{"type":"null"}`), "color", `unsupported type "null"`},
		{"array without items", wrap(`{"type":"array"}`), "color", "arrays must be multi-select enums"},
		{"array of strings", wrap(`{"type":"array","items":{"type":"string"}}`), "color", "arrays are only allowed as multi-select enums"},
		{"array of objects", wrap(`{"type":"array","items":{"type":"object","properties":{}}}`), "color", "array items must be of type string"},
		{"array enum without type", wrap(`{"type":"array","items":{"enum":["a"]}}`), "color", "arrays are only allowed as multi-select enums"},
		{"items extra keyword", wrap(`{"type":"array","items":{"type":"string","enum":["a"],"pattern":"a"}}`), "color", `unsupported keyword "pattern" in items`},
		{"anyOf bad option", wrap(`{"type":"array","items":{"anyOf":[{"const":"a"}]}}`), "color", "invalid items anyOf"},
		{"oneOf bad option", wrap(`{"type":"string","oneOf":[{"const":"a","title":"A","x":1}]}`), "color", "invalid oneOf"},
		{"enum and oneOf", wrap(`{"type":"string","enum":["a"],"oneOf":[{"const":"a","title":"A"}]}`), "color", "enum and oneOf cannot be combined"},
		{"enum on number", wrap(`{"type":"number","enum":[1,2]}`), "color", "enum is not allowed for number properties"},
		{"enumNames without enum", wrap(`{"type":"string","enumNames":["A"]}`), "color", "enumNames is not allowed for string properties"},
		{"enum of numbers", wrap(`{"type":"string","enum":[1]}`), "color", "invalid enum"},
		{"unknown keyword", wrap(`{"type":"string","examples":["x"]}`), "color", `unsupported keyword "examples"`},
		{"fractional minLength", wrap(`{"type":"string","minLength":1.5}`), "color", "invalid minLength"},
		{"minLength on boolean", wrap(`{"type":"boolean","minLength":1}`), "color", "minLength is not allowed for boolean properties"},
		{"bad pattern", wrap(`{"type":"string","pattern":"("}`), "color", "invalid pattern"},
		{"bad format", wrap(`{"type":"string","format":"hostname"}`), "color", `unsupported format "hostname"`},
		{"default wrong type", wrap(`{"type":"integer","default":"30"}`), "color", "default must be an integer"},
		{"default not integral", wrap(`{"type":"integer","default":30.5}`), "color", "default must be an integer"},
		{"default not in enum", wrap(`{"type":"string","enum":["a"],"default":"b"}`), "color", "default must be one of"},
		{"default multi not strings", wrap(`{"type":"array","items":{"type":"string","enum":["a"]},"default":[1]}`), "color", "default must be an array of strings"},
		{"empty enum", wrap(`{"type":"string","enum":[]}`), "color", "enum must not be empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Parse([]byte(tt.in))
			if err == nil {
				t.Fatalf("Parse succeeded: %s", marshal(t, s))
			}
			if !strings.HasPrefix(err.Error(), "elicitation: ") || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q, want it to contain %q", err, tt.want)
			}
			var fe *FieldError
			if isField := errors.As(err, &fe); isField != (tt.field != "") || (isField && fe.Field != tt.field) {
				t.Errorf("error %#v, want field %q", err, tt.field)
			}
		})
	}
}
