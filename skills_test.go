package mcphandler_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/mcphandler/mcphandler"
)

func TestSkillsManifestMatchesTheBytesServed(t *testing.T) {
	srv := skillsServer(t, nil)
	res, e, raw := skillCall(t, srv, "acme-viewer", "server/discover", "")
	if e != nil || !strings.Contains(string(raw), `"io.modelcontextprotocol/skills":{"directoryRead":true}`) ||
		!strings.Contains(string(raw), `"io.modelcontextprotocol/tasks":{}`) || res["capabilities"].(map[string]any)["resources"] == nil {
		t.Fatalf("discover does not declare skills, tasks and resources: %s", raw)
	}
	res, e, raw = skillCall(t, srv, "acme-viewer", "skills/list", "")
	if e != nil || res["ttlMs"] == nil || res["cacheScope"] != "private" {
		t.Fatalf("skills/list: %s", raw)
	}
	skills := res["skills"].([]any)
	if len(skills) != 1 {
		t.Fatalf("viewer sees %d skills, want 1 (the admin one is hidden): %s", len(skills), raw)
	}
	entry := skills[0].(map[string]any)
	if entry["uri"] != "skill://pdf-processing/SKILL.md" {
		t.Fatalf("uri %v", entry["uri"])
	}
	fm := entry["frontmatter"].(map[string]any)
	if fm["name"] != "pdf-processing" || fm["description"] != `Extract: "PDF" forms` {
		t.Fatalf("frontmatter %v", fm)
	}
	files := entry["resources"].([]any)
	if len(files) != 3 {
		t.Fatalf("manifest has %d files, want 3: %v", len(files), files)
	}
	for _, f := range files {
		f := f.(map[string]any)
		uri := f["uri"].(string)
		rr, e, raw := skillCall(t, srv, "acme-viewer", "resources/read", `"uri":`+strconv.Quote(uri))
		if e != nil {
			t.Fatalf("read %s: %s", uri, raw)
		}
		c := rr["contents"].([]any)[0].(map[string]any)
		var body []byte
		if txt, ok := c["text"].(string); ok {
			body = []byte(txt)
		} else {
			json.Unmarshal([]byte(strconv.Quote(c["blob"].(string))), &body)
		}
		sum := sha256.Sum256(body)
		if f["digest"] != "sha256:"+hex.EncodeToString(sum[:]) || int(f["size"].(float64)) != len(body) {
			t.Fatalf("%s: manifest %v %v, served %d bytes with digest %x", uri, f["digest"], f["size"], len(body), sum)
		}
		if uri == "skill://pdf-processing/SKILL.md" &&
			!strings.HasPrefix(string(body), "---\nname: pdf-processing\ndescription: \"Extract: \\\"PDF\\\" forms\"\n---\n# PDF\n") {
			t.Fatalf("SKILL.md %q", body)
		}
	}
	got, e, raw := skillCall(t, srv, "acme-viewer", "skills/get", `"uri":"skill://pdf-processing/SKILL.md"`)
	if e != nil || got["skill"].(map[string]any)["uri"] != entry["uri"] || got["nextCursor"] != nil || got["ttlMs"] == nil {
		t.Fatalf("skills/get: %s", raw)
	}
}

func TestSkillsDirectoryRead(t *testing.T) {
	srv := skillsServer(t, nil)
	res, e, raw := skillCall(t, srv, "acme-viewer", "resources/directory/read", `"uri":"skill://pdf-processing"`)
	if e != nil {
		t.Fatalf("root: %s", raw)
	}
	want := `[{"mimeType":"text/markdown","name":"SKILL.md","size":73,"uri":"skill://pdf-processing/SKILL.md"},` +
		`{"mimeType":"application/octet-stream","name":"logo.bin","size":3,"uri":"skill://pdf-processing/logo.bin"},` +
		`{"mimeType":"inode/directory","name":"references","uri":"skill://pdf-processing/references"}]`
	if b, _ := json.Marshal(res["resources"]); string(b) != want {
		t.Fatalf("root children\n got %s\nwant %s", b, want)
	}
	res, e, raw = skillCall(t, srv, "acme-viewer", "resources/directory/read", `"uri":"skill://pdf-processing/references/"`)
	if e != nil || len(res["resources"].([]any)) != 1 {
		t.Fatalf("subdirectory: %s", raw)
	}
	for _, uri := range []string{"skill://pdf-processing/SKILL.md", "skill://pdf-processing/references/FORMS.md", "skill://pdf-processing/nope"} {
		_, e, raw := skillCall(t, srv, "acme-viewer", "resources/directory/read", `"uri":`+strconv.Quote(uri))
		if e == nil || e["code"].(float64) != -32602 {
			t.Fatalf("%s is not a directory, got %s", uri, raw)
		}
	}
}

// A skill the caller may not see answers skills/get, resources/read and
// resources/directory/read byte for byte like one that does not exist.
func TestSkillsHiddenAnswersLikeUnknown(t *testing.T) {
	srv := skillsServer(t, nil)
	cases := []struct{ method, hidden, unknown string }{
		{"skills/get", "skill://board-minutes/SKILL.md", "skill://board-minutez/SKILL.md"},
		{"resources/read", "skill://board-minutes/SKILL.md", "skill://board-minutez/SKILL.md"},
		{"resources/read", "skill://board-minutes/references/2026.md", "skill://board-minutez/references/2026.md"},
		{"resources/directory/read", "skill://board-minutes", "skill://board-minutez"},
		{"resources/directory/read", "skill://board-minutes/references", "skill://board-minutez/references"},
	}
	for _, c := range cases {
		_, _, hb := skillCall(t, srv, "acme-viewer", c.method, `"uri":`+strconv.Quote(c.hidden))
		_, _, ub := skillCall(t, srv, "acme-viewer", c.method, `"uri":`+strconv.Quote(c.unknown))
		if got := strings.ReplaceAll(string(hb), "board-minutes", "board-minutez"); got != string(ub) || !strings.Contains(got, `"error"`) {
			t.Errorf("%s %s\nhidden  %s\nunknown %s", c.method, c.hidden, hb, ub)
		}
		_, e, ab := skillCall(t, srv, "acme-admin", c.method, `"uri":`+strconv.Quote(c.hidden))
		if e != nil {
			t.Errorf("admin %s %s: %s", c.method, c.hidden, ab)
		}
	}
	_, _, lb := skillCall(t, srv, "acme-viewer", "resources/list", "")
	if strings.Contains(string(lb), "board-minutes") || !strings.Contains(string(lb), "skill://pdf-processing/SKILL.md") {
		t.Fatalf("resources/list: %s", lb)
	}
}

// Odd URIs a client sends never reach outside a visible skill and answer
// like an unknown skill; a skill the hook gets wrong fails the request.
func TestSkillsBounds(t *testing.T) {
	srv := skillsServer(t, nil)
	odd := []string{
		"skill://pdf-processing/../board-minutes/SKILL.md", "skill://pdf-processing//SKILL.md",
		"skill://pdf-processing/SKILL.md/", "SKILL://pdf-processing/SKILL.md", "skill://",
		"skill://pdf-processing/SKILL.md" + strings.Repeat("/x", 600), "skill://pdf-processing/references/../SKILL.md",
	}
	for _, uri := range odd {
		for _, method := range []string{"skills/get", "resources/read"} {
			_, e, raw := skillCall(t, srv, "acme-viewer", method, `"uri":`+strconv.Quote(uri))
			if e == nil || e["code"].(float64) != -32602 {
				t.Errorf("%s %q: %s", method, uri, raw)
			}
		}
	}
	bad := badSkills()
	// A definition the handler cannot serve is left out (and logged once:
	// TestAttackBadSkillDefinitions); the list stays an answer.
	for why, s := range bad {
		srv := skillsServer(t, func(context.Context) ([]mcphandler.Skill, error) { return []mcphandler.Skill{s}, nil })
		res, e, raw := skillCall(t, srv, "acme-viewer", "skills/list", "")
		if e != nil || len(res["skills"].([]any)) != 0 {
			t.Errorf("%s: %s", why, raw)
		}
	}
	dup := skillsServer(t, func(context.Context) ([]mcphandler.Skill, error) {
		return []mcphandler.Skill{{Name: "a", Description: "d"}, {Name: "a", Description: "e"}}, nil
	})
	if res, e, raw := skillCall(t, dup, "acme-viewer", "skills/list", ""); e != nil || len(res["skills"].([]any)) != 0 {
		t.Errorf("a name listed twice: %s", raw)
	}
}
