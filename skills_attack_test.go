package mcphandler_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/mcphandler/mcphandler"
)

// The host's ListSkills returns, beside a good skill, definitions the
// handler cannot serve: a name outside the Agent Skills rules, no
// description, a file path that climbs out or repeats, too many files,
// too many bytes, two skills of one name. As for tools, none of them may
// break the caller's list: each is left out (both of a repeated name),
// answers exactly like a skill that does not exist, and is logged once
// however many requests see it; the good skill is served as before, on
// both eras.
func TestAttackBadSkillDefinitions(t *testing.T) {
	bad := badSkills()
	good := mcphandler.Skill{Name: "good", Description: "served", Body: "# Good\n"}
	twice := []mcphandler.Skill{{Name: "twice", Description: "one"}, {Name: "twice", Description: "two"}}
	for why, s := range bad {
		t.Run(why, func(t *testing.T) {
			var log syncBuffer
			h := mcphandler.New(mcphandler.Config{
				Authenticate: bearer,
				Logger:       slog.New(slog.NewJSONHandler(&log, nil)),
				ListTools:    func(context.Context) ([]mcphandler.Tool, error) { return nil, nil },
				ListSkills: func(context.Context) ([]mcphandler.Skill, error) {
					return append([]mcphandler.Skill{s, good}, twice...), nil
				},
			})
			srv := httptest.NewServer(h)
			defer func() { srv.Close(); h.Close() }()
			c := connect(t, h, "acme-viewer")
			ctx := context.Background()
			for range 3 {
				res, e, raw := skillCall(t, srv, "acme-viewer", "skills/list", "")
				if e != nil || len(res["skills"].([]any)) != 1 || !strings.Contains(string(raw), `"skill://good/SKILL.md"`) {
					t.Fatalf("2026-07-28 skills/list: %s", raw)
				}
				raw2, err := c.Call(ctx, "skills/list", map[string]any{})
				var list struct{ Skills []struct{ URI string } }
				if err != nil || json.Unmarshal(raw2, &list) != nil || len(list.Skills) != 1 || list.Skills[0].URI != "skill://good/SKILL.md" {
					t.Fatalf("2025 skills/list: %s %v", raw2, err)
				}
			}
			for _, name := range []string{s.Name, "twice"} {
				uri := "skill://" + name + "/SKILL.md"
				_, e, raw := skillCall(t, srv, "acme-viewer", "skills/get", `"uri":`+strconv.Quote(uri))
				_, e2, raw2 := skillCall(t, srv, "acme-viewer", "skills/get", `"uri":"skill://nosuch/SKILL.md"`)
				if e == nil || e2 == nil || strings.ReplaceAll(string(raw), name, "nosuch") != string(raw2) {
					t.Errorf("skills/get of the left-out %q: %s, of a skill that does not exist: %s", name, raw, raw2)
				}
			}
			lines := strings.Split(strings.TrimSpace(log.String()), "\n")
			seen := map[string]int{}
			for _, l := range lines {
				var rec struct {
					Skill, Reason string
				}
				if json.Unmarshal([]byte(l), &rec) == nil && rec.Skill != "" {
					seen[rec.Skill]++
				}
			}
			if seen[s.Name] != 1 || seen["twice"] != 1 || len(seen) != 2 {
				t.Errorf("log lines per left-out skill: %v (want %q and twice once each):\n%s", seen, s.Name, log.String())
			}
		})
	}
}
