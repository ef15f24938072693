package mcphandler

import (
	"encoding/json"
	"testing"

	"github.com/mcphandler/mcphandler/internal/canon"
)

type flatIn struct {
	Text string   `json:"text" jsonschema:"A text."`
	N    int      `json:"n,omitempty"`
	F    float64  `json:"f,omitempty"`
	B    bool     `json:"b,omitempty"`
	P    *string  `json:"p,omitempty"`
	S    []string `json:"s,omitempty"`
}

// fullAccepts is the verdict of the full validator alone.
func fullAccepts(t testing.TB, schema string, args []byte) bool {
	in, err := resolveSchema(json.RawMessage(schema))
	if err != nil {
		t.Fatal(err)
	}
	var v any
	return json.Unmarshal(args, &v) == nil && in.Validate(v) == nil
}

// TestFlatSchemaCompiles: a schema derived from a struct of plain fields
// takes the fast path; a schema saying anything more does not.
func TestFlatSchemaCompiles(t *testing.T) {
	for _, s := range flatSchemas {
		if compileFlat(json.RawMessage(s)) == nil {
			t.Errorf("no fast path for %s", s)
		}
	}
	for _, s := range []string{
		string(mustSchema[flatIn]("t", "input")), // an array property
		`{"type":"object","properties":{"a":{"type":"string","minLength":3}}}`,
		`{"type":"object","properties":{"a":{"type":"string","enum":["x"]}}}`,
		`{"type":"object","properties":{"a":{"type":"object"}}}`,
		`{"type":"object","properties":{"a":{"$ref":"#"}}}`,
		`{"type":"object","properties":{"a":{}}}`,
		`{"type":"object","properties":{"a":{"type":[]}}}`,
		`{"type":"object","properties":{"a\\u0062":{"type":"string"}}}`,
		`{"type":"object","properties":{"a":{"type":"string"}},"required":["b"]}`,
		`{"type":"object","additionalProperties":{"type":"string"}}`,
		`{"type":"object","patternProperties":{"^a":{"type":"string"}}}`,
		`{"type":"object","minProperties":1}`,
		`{"type":["object","null"]}`,
		`{"type":"string"}`,
		`{"$defs":{},"type":"object"}`,
		`true`,
		`null`,
	} {
		if compileFlat(json.RawMessage(s)) != nil {
			t.Errorf("fast path for %s, which says more than it reads", s)
		}
	}
}

// flatAttacks are arguments built to slip past a checker that reads raw
// bytes: escaped and case-folded keys, keys equal after decoding, values
// of the wrong type at every position, numbers at the edge of float64,
// whitespace, nesting, and non-objects.
var flatAttacks = []string{
	`{"text":"hi"}`, `{"text":"hi","n":3,"f":1.5,"b":true,"p":null}`, `{"text":""}`,
	`{}`, `{"n":1}`, `null`, `[]`, `"text"`, `1`, ` {"text":"x"} `, `{ "text" : "x" }`,
	`{"TEXT":"x"}`, `{"Text":"x"}`, `{"te\u0078t":"x"}`, `{"text":"x","te\u0078t":1}`,
	`{"text":1}`, `{"text":null}`, `{"text":true}`, `{"text":["x"]}`, `{"text":{"a":1}}`,
	`{"text":"x","n":1.0}`, `{"text":"x","n":1e2}`, `{"text":"x","n":1e400}`, `{"text":"x","f":1e400}`,
	`{"text":"x","n":-0}`, `{"text":"x","n":123456789012345}`, `{"text":"x","n":12345678901234567890123}`,
	`{"text":"x","n":"1"}`, `{"text":"x","b":"true"}`, `{"text":"x","b":0}`, `{"text":"x","p":1}`,
	`{"text":"x","extra":1}`, `{"text":"x","\u00e9":1}`, "{\"text\":\"x\",\"\xff\":1}",
	`{"a":1}`, `{"a":1.5}`, `{"a":"1"}`, `{"a":1,"b":null}`, `{"a":1,"b":"x"}`, `{"b":2}`,
	`{"a":"x","a":"y"}`, `{"a":1,"a":"x"}`, `{"text":"x","text":"y"}`,
}

// TestFlatSchemaNeverAcceptsMore: the fast path accepts only arguments the
// full validator accepts, for every schema and attack input; and it does
// take the valid ones (else it would be no fast path).
func TestFlatSchemaNeverAcceptsMore(t *testing.T) {
	fast := 0
	for _, s := range flatSchemas {
		f := compileFlat(json.RawMessage(s))
		for _, a := range flatAttacks {
			if canon.Check([]byte(a), canon.Limits{}) != nil {
				continue // the message check refuses it before any tool sees it
			}
			got := f.accept([]byte(a))
			if got && !fullAccepts(t, s, []byte(a)) {
				t.Errorf("schema %s: fast path accepts %s, the validator refuses it", s, a)
			}
			if got {
				fast++
			}
		}
	}
	if f := compileFlat(json.RawMessage(flatSchemas[0])); !f.accept([]byte(`{"text":"hi","n":3,"f":1.5,"b":true,"p":null}`)) {
		t.Error("valid arguments missed the fast path")
	}
	if fast < 10 {
		t.Errorf("only %d inputs took the fast path", fast)
	}
}

// TestFlatSchemaAllocs: the fast path decodes nothing.
func TestFlatSchemaAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	f := compileFlat(json.RawMessage(flatSchemas[0]))
	args := []byte(`{"text":"a long enough text to notice a copy of it","n":3,"b":true}`)
	if n := testing.AllocsPerRun(100, func() { f.accept(args) }); n != 0 {
		t.Errorf("accept allocates %v times", n)
	}
}

// FuzzFlatSchema: for any arguments the message check lets through, the
// fast path never accepts what the full validator refuses.
func FuzzFlatSchema(f *testing.F) {
	for _, a := range flatAttacks {
		f.Add(0, a)
	}
	flats := make([]*flatSchema, len(flatSchemas))
	for i, s := range flatSchemas {
		flats[i] = compileFlat(json.RawMessage(s))
	}
	f.Fuzz(func(t *testing.T, which int, args string) {
		i := uint(which) % uint(len(flatSchemas))
		if canon.Check([]byte(args), canon.Limits{}) != nil {
			return
		}
		if flats[i].accept([]byte(args)) && !fullAccepts(t, flatSchemas[i], []byte(args)) {
			t.Fatalf("schema %s: fast path accepts %q, the validator refuses it", flatSchemas[i], args)
		}
	})
}
