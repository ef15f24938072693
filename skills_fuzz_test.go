package mcphandler

import (
	"encoding/json"
	"strings"
	"testing"
)

// FuzzSkillURI: whatever URI a client sends, it resolves only inside the
// visible skill it names, and a directory listing never leaves that skill.
// FuzzSkillURI also feeds the same bytes to the MCP Apps declaration parser.
func FuzzSkillURI(f *testing.F) {
	for _, s := range []string{"skill://pdf-processing/SKILL.md", "skill://pdf-processing", "skill://pdf-processing/references/",
		"skill://pdf-processing/../x", "skill://", "skill:///", "skill://a/b//c", `{"mimeTypes":["text/html;profile=mcp-app"]}`} {
		f.Add(s)
	}
	ss, err := serveSkill(&Skill{Name: "pdf-processing", Description: "d", Files: []SkillFile{
		{Path: "references/FORMS.md", Content: []byte("x")}, {Path: "a/b/c.txt", Content: []byte("y")}}})
	if err != nil {
		f.Fatal(err)
	}
	skills := []*servedSkill{ss}
	f.Fuzz(func(t *testing.T, uri string) {
		declaresApps(map[string]json.RawMessage{appsExtensionID: json.RawMessage(uri)})
		got := skillOf(skills, uri)
		if got == nil {
			return
		}
		if !strings.HasPrefix(uri, "skill://pdf-processing/") && uri != "skill://pdf-processing" {
			t.Fatalf("%q resolved to skill %q", uri, got.name)
		}
		for _, k := range got.children(strings.TrimSuffix(uri, "/")) {
			if !strings.HasPrefix(k.URI, "skill://pdf-processing/") || strings.Contains(k.URI, "/../") {
				t.Fatalf("%q lists %q", uri, k.URI)
			}
		}
	})
}
