package mcphandler_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/mcphandler/mcphandler"
)

// benchSkills returns n skills, each a SKILL.md with a body of bodyBytes
// and files files of fileBytes.
func benchSkills(n, bodyBytes, files, fileBytes int) []mcphandler.Skill {
	skills := make([]mcphandler.Skill, n)
	for i := range skills {
		s := mcphandler.Skill{Name: fmt.Sprintf("skill-%03d", i), Description: "A skill for the benchmark.",
			Body: strings.Repeat("x", bodyBytes)}
		for j := range files {
			s.Files = append(s.Files, mcphandler.SkillFile{Path: fmt.Sprintf("ref/f%02d.txt", j),
				Content: bytes.Repeat([]byte{byte('a' + j%26)}, fileBytes)})
		}
		skills[i] = s
	}
	return skills
}

// BenchmarkSkillsList measures a skills/list whose manifests carry the
// digest of every file: large files (20 skills of 4 × 64 KiB) and many
// small ones (100 skills of 2 × 200 B).
func BenchmarkSkillsList(b *testing.B) {
	for _, tc := range []struct {
		name                           string
		n, bodyBytes, files, fileBytes int
	}{{"large", 20, 2048, 4, 64 << 10}, {"small", 100, 300, 2, 200}} {
		b.Run(tc.name, func(b *testing.B) {
			skills := benchSkills(tc.n, tc.bodyBytes, tc.files, tc.fileBytes)
			h := mcphandler.New(mcphandler.Config{
				Authenticate: bearer,
				Limits:       mcphandler.Limits{PageSize: 1000},
				ListSkills:   func(context.Context) ([]mcphandler.Skill, error) { return skills, nil },
			})
			defer h.Close()
			serveLoop(b, h, `{"jsonrpc":"2.0","id":1,"method":"skills/list"}`)
		})
	}
}
