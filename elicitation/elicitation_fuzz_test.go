package elicitation

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mcphandler/mcphandler/internal/costguard"
)

var schemaSeeds = []string{
	`{"type":"object","properties":{"name":{"type":"string","title":"Name","minLength":1,"maxLength":20,"pattern":"^[a-z]+$"},"age":{"type":"integer","minimum":0,"maximum":150,"default":30}},"required":["name"]}`,
	`{"type":"object","properties":{"c":{"type":"string","enum":["a","b"],"enumNames":["A","B"],"default":"a"}}}`,
	`{"type":"object","properties":{"c":{"type":"string","oneOf":[{"const":"a","title":"A"}]}}}`,
	`{"type":"object","properties":{"m":{"type":"array","items":{"type":"string","enum":["x","y"]},"minItems":1,"maxItems":2,"default":["x"]}}}`,
	`{"type":"object","properties":{"m":{"type":"array","items":{"anyOf":[{"const":"x","title":"X"}]}}}}`,
	`{"type":"object","properties":{"e":{"type":"string","format":"email"},"d":{"type":"string","format":"date"},"u":{"type":"string","format":"uri"},"t":{"type":"string","format":"date-time"}}}`,
	`{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","properties":{"ok":{"type":"boolean","default":false}},"required":["ok"]}`,
	`{"type":"object","properties":{"n":{"type":"number","minimum":1.5}}}`,
	`{"type":"object","properties":{"a":{"type":"string"},"a":{"type":"number"}}}`, `{"type":"object","properties":{"o":{"type":"object"}}}`,
	`{"type":"array"}`, `[]`, `{`, `null`,
}

var resultSeeds = []string{
	`{"action":"accept","content":{"name":"bob","age":30}}`, `{"action":"decline"}`, `{"action":"cancel","_meta":{}}`,
	`{"action":"accept","content":{"m":["x","y"],"ok":true,"n":1e400}}`, `{"action":"accept","content":{"a":{"b":1}}}`,
	`{"action":"accept","content":[1]}`, `{"action":"decline","content":{"a":1}}`, `{"action":"nope"}`, `{}`, `{"action":"accept","content":null}`,
	`{"action":"accept","content":{"age":9223372036854775808,"x":-0,"y":1.5e3}}`,
}

// manyProperties is a schema of n properties: reading it must not compare
// every name with every other.
func manyProperties(n int) []byte {
	var b strings.Builder
	b.WriteString(`{"type":"object","properties":{`)
	for i := range n {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `"p%d":{"type":"string"}`, i)
	}
	b.WriteString(`}}`)
	return []byte(b.String())
}

// manyValues is a multi-select of n values and an answer choosing them all.
func manyValues(n int) (schema, result []byte) {
	vals := make([]string, n)
	for i := range vals {
		vals[i] = fmt.Sprintf("v%d", i)
	}
	v, _ := json.Marshal(vals)
	return []byte(`{"type":"object","properties":{"m":{"type":"array","items":{"type":"string","enum":` + string(v) + `}}}}`),
		[]byte(`{"action":"accept","content":{"m":` + string(v) + `}}`)
}

// parseCost is the time Parse is allowed per MiB: it decodes each property
// with several encoding/json calls, about 300 ns per byte for a schema of
// many small properties, linear but above costguard.PerMB.
const parseCost = time.Second

// FuzzParse: any requestedSchema is read without panic in linear time, and
// a schema Parse accepts marshals to JSON that parses to the same schema.
func FuzzParse(f *testing.F) {
	for _, s := range schemaSeeds {
		f.Add([]byte(s))
	}
	f.Add(manyProperties(2000))
	f.Fuzz(func(t *testing.T, raw []byte) {
		var s *Schema
		var err error
		costguard.CheckPerMB(t, len(raw), parseCost, func() { s, err = Parse(raw) })
		if err != nil {
			var fe *FieldError
			if !errors.As(err, &fe) && !strings.HasPrefix(err.Error(), "elicitation: ") {
				t.Fatalf("Parse(%q) = %v", raw, err)
			}
			return
		}
		out, err := s.MarshalJSON()
		if err != nil {
			t.Fatalf("Parse(%q) accepted a schema that does not marshal: %v", raw, err)
		}
		again, err := Parse(out)
		if err != nil {
			t.Fatalf("Parse(%q) = %q, which does not parse: %v", raw, out, err)
		}
		if out2, err := again.MarshalJSON(); err != nil || !bytes.Equal(out, out2) {
			t.Fatalf("round trip: %q -> %q -> %q, %v", raw, out, out2, err)
		}
	})
}

// FuzzParseResult: any elicitation result is read without panic in linear
// time, into an action and normalised content values.
func FuzzParseResult(f *testing.F) {
	for _, s := range resultSeeds {
		f.Add([]byte(s))
	}
	_, many := manyValues(5000)
	f.Add(many)
	f.Fuzz(func(t *testing.T, raw []byte) {
		var r Result
		var err error
		costguard.Check(t, len(raw), func() { r, err = ParseResult(raw) })
		if err != nil {
			return
		}
		switch r.Action {
		case Accept:
		case Decline, Cancel:
			if r.Content != nil {
				t.Fatalf("ParseResult(%q): content with %s", raw, r.Action)
			}
		default:
			t.Fatalf("ParseResult(%q): action %q", raw, r.Action)
		}
		for k, v := range r.Content {
			switch v.(type) {
			case nil, string, bool, int64, float64, []string:
			default:
				t.Fatalf("ParseResult(%q): content %q is a %T", raw, k, v)
			}
		}
	})
}

// FuzzValidate: validating any answer against any schema never panics and
// costs linear time (a multi-select of n items over n values included).
func FuzzValidate(f *testing.F) {
	for _, s := range schemaSeeds {
		for _, r := range resultSeeds {
			f.Add([]byte(s), []byte(r))
		}
	}
	s, r := manyValues(5000)
	f.Add(s, r)
	f.Fuzz(func(t *testing.T, schema, result []byte) {
		s, err := Parse(schema)
		if err != nil {
			return
		}
		r, err := ParseResult(result)
		if err != nil {
			return
		}
		costguard.Check(t, len(schema)+len(result), func() {
			err = s.Validate(r.Content)
			r.Confirmed(s, "ok", true)
		})
		var fe *FieldError
		if err != nil && !errors.As(err, &fe) {
			t.Fatalf("Validate = %v, not a *FieldError", err)
		}
	})
}

// TestCost: the attacker's shapes at scale stay within the cost guard (the
// former Parse compared every property name with every other, and the
// former Validate every selected item with every value).
func TestCost(t *testing.T) {
	wide := manyProperties(50000)
	costguard.CheckPerMB(t, len(wide), parseCost, func() {
		if s, err := Parse(wide); err != nil || len(s.Names()) != 50000 {
			t.Fatalf("Parse: %v", err)
		}
	})
	schema, result := manyValues(50000)
	s, err := Parse(schema)
	if err != nil {
		t.Fatal(err)
	}
	r, err := ParseResult(result)
	if err != nil {
		t.Fatal(err)
	}
	costguard.Check(t, len(schema)+len(result), func() {
		if err := s.Validate(r.Content); err != nil {
			t.Fatal(err)
		}
	})
}
