package elicitation

import (
	"reflect"
	"strings"
	"testing"
)

func TestParseResult(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want Result
	}{
		{"accept", `{"action":"accept","content":{"name":"Al","age":30,"score":95.5,"big":9007199254740993,"ok":true,"tags":["a","b"],"none":[],"gone":null},"_meta":{"x":1}}`,
			Result{Accept, map[string]any{"name": "Al", "age": int64(30), "score": 95.5, "big": int64(9007199254740993), "ok": true, "tags": []string{"a", "b"}, "none": []string{}, "gone": nil}}},
		{"integer beyond int64 is float64", `{"action":"accept","content":{"n":99999999999999999999}}`, Result{Accept, map[string]any{"n": 1e20}}},
		{"number out of float64 range", `{"action":"accept","content":{"n":1e400}}`, Result{}},
		{"exponent is float", `{"action":"accept","content":{"n":1e3}}`, Result{Accept, map[string]any{"n": 1000.0}}},
		{"accept without content", `{"action":"accept"}`, Result{Action: Accept}},
		{"decline", `{"action":"decline"}`, Result{Action: Decline}},
		{"cancel with null content", `{"action":"cancel","content":null}`, Result{Action: Cancel}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseResult([]byte(tt.in))
			if tt.want.Action == "" {
				if err == nil {
					t.Fatalf("ParseResult = %#v, want error", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got  %#v\nwant %#v", got, tt.want)
			}
		})
	}
}

func TestParseResultErrors(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"not json", `{"action":`, "invalid result"},
		{"not object", `"accept"`, "invalid result"},
		{"null", `null`, "result has no action"},
		{"missing action", `{"content":{}}`, "result has no action"},
		{"unknown action", `{"action":"reject"}`, `unknown action "reject"`},
		{"action not string", `{"action":1}`, "invalid result"},
		{"empty action", `{"action":""}`, `unknown action ""`},
		{"content on decline", `{"action":"decline","content":{"a":1}}`, `content is not allowed with action "decline"`},
		{"content on cancel", `{"action":"cancel","content":{}}`, `content is not allowed with action "cancel"`},
		{"content not object", `{"action":"accept","content":[1]}`, "content must be a JSON object"},
		{"nested object", `{"action":"accept","content":{"a":{"b":1}}}`, `field "a": must be a string, number, boolean or array of strings`},
		{"array of numbers", `{"action":"accept","content":{"a":[1]}}`, `field "a": must be a string, number, boolean or array of strings`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseResult([]byte(tt.in))
			if err == nil || !strings.HasPrefix(err.Error(), "elicitation: ") || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error = %v, want %q", err, tt.want)
			}
		})
	}
}

func TestConfirmed(t *testing.T) {
	confirm := Confirm("confirm", "Really?")
	typed := TypeToConfirm("repo", `Type "acme/web"`, "acme/web")
	tests := []struct {
		name     string
		raw      string
		schema   *Schema
		field    string
		expected any
		want     bool
	}{
		{"ticked", `{"action":"accept","content":{"confirm":true}}`, confirm, "confirm", true, true},
		{"unticked", `{"action":"accept","content":{"confirm":false}}`, confirm, "confirm", true, false},
		{"declined", `{"action":"decline"}`, confirm, "confirm", true, false},
		{"cancelled", `{"action":"cancel"}`, confirm, "confirm", true, false},
		{"accepted without content", `{"action":"accept"}`, confirm, "confirm", true, false},
		{"wrong type", `{"action":"accept","content":{"confirm":"true"}}`, confirm, "confirm", true, false},
		{"extra field", `{"action":"accept","content":{"confirm":true,"x":1}}`, confirm, "confirm", true, false},
		{"typed exactly", `{"action":"accept","content":{"repo":"acme/web"}}`, typed, "repo", "acme/web", true},
		{"typed wrongly", `{"action":"accept","content":{"repo":"acme/Web"}}`, typed, "repo", "acme/web", false},
		{"typed with spaces", `{"action":"accept","content":{"repo":" acme/web"}}`, typed, "repo", "acme/web", false},
		{"number by value", `{"action":"accept","content":{"n":3}}`, NewSchema().Integer("n"), "n", 3, true},
		{"strings by element", `{"action":"accept","content":{"m":["a"]}}`, NewSchema().MultiEnum("m", []string{"a"}), "m", []string{"a"}, true},
		{"nil schema", `{"action":"accept","content":{"confirm":true}}`, nil, "confirm", true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := ParseResult([]byte(tt.raw))
			if err != nil {
				t.Fatal(err)
			}
			if got := r.Confirmed(tt.schema, tt.field, tt.expected); got != tt.want {
				t.Errorf("Confirmed = %v, want %v", got, tt.want)
			}
		})
	}
}
