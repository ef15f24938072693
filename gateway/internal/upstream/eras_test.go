package upstream_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/gateway/internal/upstream"
)

func TestMain(m *testing.M) { mainWithLeakCheck(m) }

// Each era lists the library's tools, exactly as it defines them.
func TestListToolsEachEra(t *testing.T) {
	l := newLib(t, mcphandler.Config{ListTools: tools()})
	for _, e := range eras {
		t.Run(e.name, func(t *testing.T) {
			ts, err := upstream.ListTools(context.Background(), l.at(e.era, e.path), allCaps)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, tl := range ts {
				names = append(names, tl.Name)
				var def struct{ Name, Description string }
				if err := json.Unmarshal(tl.Def, &def); err != nil || def.Name != tl.Name || def.Description == "" {
					t.Errorf("def %s: %v", tl.Def, err)
				}
			}
			if want := []string{"greet", "ask_color", "sample", "roots"}; !slices.Equal(names, want) {
				t.Errorf("names %v, want %v", names, want)
			}
		})
	}
}

// Each era calls a tool and gets its result, without the hop's envelope.
func TestCallToolEachEra(t *testing.T) {
	l := newLib(t, mcphandler.Config{ListTools: tools()})
	for _, e := range eras {
		t.Run(e.name, func(t *testing.T) {
			res, err := upstream.CallTool(context.Background(), l.at(e.era, e.path), nil, "greet", json.RawMessage(`{"name":"Ada"}`), nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := text(t, res); got != "Hello Ada" {
				t.Errorf("text %q", got)
			}
			var m map[string]json.RawMessage
			_ = json.Unmarshal(res, &m)
			if _, ok := m["resultType"]; ok {
				t.Errorf("result keeps resultType: %s", res)
			}
		})
	}
}

// Every question a tool asks mid-call reaches the Asker, in every era, and
// its answer reaches the tool.
func TestQuestionsEachEra(t *testing.T) {
	l := newLib(t, mcphandler.Config{ListTools: tools()})
	cases := []struct{ tool, method, want string }{
		{"ask_color", "elicitation/create", "color=teal"},
		{"sample", "sampling/createMessage", "model said bonjour"},
		{"roots", "roots/list", "roots file:///src"},
	}
	for _, e := range eras {
		for _, c := range cases {
			t.Run(e.name+"/"+c.tool, func(t *testing.T) {
				a := &asker{}
				res, err := upstream.CallTool(context.Background(), l.at(e.era, e.path), allCaps, c.tool, nil, a)
				if err != nil {
					t.Fatal(err)
				}
				if got := text(t, res); got != c.want {
					t.Errorf("text %q, want %q", got, c.want)
				}
				if got := a.askedMethods(); !slices.Equal(got, []string{c.method}) {
					t.Errorf("asked %v", got)
				}
			})
		}
	}
}

// A declined question reaches the tool as declined, in every era.
func TestDeclinedEachEra(t *testing.T) {
	l := newLib(t, mcphandler.Config{ListTools: tools()})
	for _, e := range eras {
		t.Run(e.name, func(t *testing.T) {
			a := &asker{answer: func(string, json.RawMessage) (json.RawMessage, error) {
				return json.RawMessage(`{"action":"decline"}`), nil
			}}
			res, err := upstream.CallTool(context.Background(), l.at(e.era, e.path), allCaps, "ask_color", nil, a)
			if err != nil {
				t.Fatal(err)
			}
			if got := text(t, res); got != "not answered: decline" {
				t.Errorf("text %q", got)
			}
		})
	}
}
