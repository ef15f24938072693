package mcphandler_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/mcphandler/mcphandler"
)

func sha(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// digestsOf lists the skills of the caller of token and returns their
// manifests' digests by URI.
func digestsOf(t *testing.T, list func(token string) (map[string]any, []byte), token string) map[string]string {
	t.Helper()
	res, raw := list(token)
	out := map[string]string{}
	skills, _ := res["skills"].([]any)
	if skills == nil {
		t.Fatalf("skills/list: %s", raw)
	}
	for _, s := range skills {
		for _, f := range s.(map[string]any)["resources"].([]any) {
			f := f.(map[string]any)
			out[f["uri"].(string)] = f["digest"].(string)
		}
	}
	return out
}

// The manifest digests follow the bytes the hook returns on each request,
// however the host changes them: a new slice, the same slice rewritten in
// place at the same length, a body of the same length, the same content
// for two tenants; from many requests at once.
func TestSkillsDigestsFollowTheContent(t *testing.T) {
	const size = 64 << 10
	shared := make([]byte, size) // rewritten in place between requests
	var gen atomic.Int64
	var fresh atomic.Bool // from many requests at once: a new slice each
	var mu sync.Mutex
	list := func(ctx context.Context) ([]mcphandler.Skill, error) {
		mu.Lock()
		defer mu.Unlock()
		g := gen.Load()
		content := shared
		if fresh.Load() {
			content = bytesOf(byte('a'+g%26), size)
		} else {
			for i := range shared {
				shared[i] = byte('a' + g%26)
			}
		}
		id, _ := mcphandler.IdentityFrom(ctx)
		body := strings.Repeat(string(rune('a'+g%26)), 4096) // same length every time
		return []mcphandler.Skill{{Name: "s", Description: "d", Body: body, Files: []mcphandler.SkillFile{
			{Path: "shared.txt", Content: content},
			{Path: "fresh.txt", Content: []byte(strings.Repeat(id.Tenant, size/len(id.Tenant)) + fmt.Sprint(g))},
		}}}, nil
	}
	srv := skillsServer(t, list)
	call := func(token string) (map[string]any, []byte) {
		res, _, raw := skillCall(t, srv, token, "skills/list", "")
		return res, raw
	}
	for g := range int64(30) {
		gen.Store(g)
		for _, token := range []string{"acme-viewer", "globex-editor"} {
			tenant := strings.Split(token, "-")[0]
			got := digestsOf(t, call, token)
			want := map[string]string{
				"skill://s/shared.txt": sha(bytesOf(byte('a'+g%26), size)),
				"skill://s/fresh.txt":  sha([]byte(strings.Repeat(tenant, size/len(tenant)) + fmt.Sprint(g))),
				"skill://s/SKILL.md":   sha([]byte("---\nname: s\ndescription: \"d\"\n---\n" + strings.Repeat(string(rune('a'+g%26)), 4096))),
			}
			for uri, d := range want {
				if got[uri] != d {
					t.Fatalf("generation %d, %s, %s: digest %s, want %s", g, token, uri, got[uri], d)
				}
			}
		}
	}
	// Many requests at once, each seeing the content of its generation:
	// the digest always matches one generation's bytes, never a mix.
	valid := map[string]bool{}
	for g := range int64(26) {
		valid[sha(bytesOf(byte('a'+g%26), size))] = true
	}
	fresh.Store(true)
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			for j := range 5 {
				gen.Store(int64(i*5 + j))
				if d := digestsOf(t, call, "acme-viewer")["skill://s/shared.txt"]; !valid[d] {
					t.Errorf("digest %s is no generation's", d)
				}
			}
		})
	}
	wg.Wait()
}

func bytesOf(c byte, n int) []byte { return []byte(strings.Repeat(string(c), n)) }

// The digest cache holds at most SkillDigestCacheSize entries, however many
// distinct files the hook returns, and a file evicted from it is digested
// again, correctly.
func TestSkillsDigestCacheBound(t *testing.T) {
	const perSkill = mcphandler.MaxSkillFiles - 1
	n := mcphandler.SkillDigestCacheSize/perSkill + 2
	skills := make([]mcphandler.Skill, n)
	for i := range skills {
		skills[i] = mcphandler.Skill{Name: fmt.Sprintf("s%d", i), Description: "d"}
		for j := range perSkill {
			skills[i].Files = append(skills[i].Files, mcphandler.SkillFile{Path: fmt.Sprintf("f%d", j),
				Content: []byte(fmt.Sprintf("%d/%d/%s", i, j, strings.Repeat("x", 1100)))})
		}
	}
	h := mcphandler.New(mcphandler.Config{Authenticate: bearer,
		ListSkills: func(context.Context) ([]mcphandler.Skill, error) { return skills, nil }})
	t.Cleanup(func() { h.Close() })
	srv := newServer(t, h)
	for range 2 {
		skillCall(t, srv, "acme-viewer", "skills/list", "")
		if got := mcphandler.SkillDigestCacheLen(h); got > mcphandler.SkillDigestCacheSize {
			t.Fatalf("the cache holds %d entries, more than %d", got, mcphandler.SkillDigestCacheSize)
		}
	}
	// Every digest of every page is still right.
	for i := range skills {
		res, _, raw := skillCall(t, srv, "acme-viewer", "skills/get", fmt.Sprintf(`"uri":"skill://s%d/SKILL.md"`, i))
		entry, _ := res["skill"].(map[string]any)
		if entry == nil {
			t.Fatalf("skills/get s%d: %s", i, raw)
		}
		for j, f := range entry["resources"].([]any)[1:] {
			if d := f.(map[string]any)["digest"]; d != sha(skills[i].Files[j].Content) {
				t.Fatalf("s%d/f%d: digest %v", i, j, d)
			}
		}
	}
}
