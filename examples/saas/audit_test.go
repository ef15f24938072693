package main

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcphandler/mcphandler/mcptest"
)

// TestAuditLog: with -audit, the server appends one JSON line per decided
// call: for delete_note approved by an admin on the page, and for one the
// admin declined, on a 2025-11-25 session and on 2026-07-28, the line
// names the caller, the page's message and URL (as the client received
// it), the admin who decided there, the digest of the arguments and the
// outcome; add_note, allowed by the policy, has its line too. The file
// is created 0600, and its lines are the records' stable member names.
func TestAuditLog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	env := startApprovals(t, options{audit: path})
	p, srv, audience := env.p, env.srv, env.audience
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the audit file: %v, %v", fi, err)
	}

	eras := []struct {
		name, org string
		opts      []mcptest.Option
	}{
		{"2025-11-25", "acme", nil},
		{"2026-07-28", "globex", []mcptest.Option{mcptest.WithEra(mcptest.Stateless)}},
	}
	shownURL := map[string]string{} // org/id -> the URL the client received
	for _, era := range eras {
		token := env.token(map[string]any{"sub": "ed", "org_id": era.org})
		decision := make(chan string, 1)
		opts := append([]mcptest.Option{mcptest.WithToken(token), mcptest.WithCapabilities(json.RawMessage(`{"elicitation":{"url":{}}}`)),
			mcptest.WithElicitationHandler(func(_ context.Context, e mcptest.ElicitParams) (mcptest.ElicitResult, error) {
				d := <-decision
				shownURL[era.org+"/"+d] = e.URL
				go func() {
					if page := p.Decide(t, map[string]any{"sub": "ada", "org_id": era.org, "role": "admin"}, e.URL, d); !strings.Contains(page, "Approved") && !strings.Contains(page, "Declined") {
						t.Errorf("admin's page:\n%s", page)
					}
				}()
				return mcptest.ElicitResult{Action: "accept"}, nil
			})}, era.opts...)
		c := mcptest.Dial(audience, opts...)
		t.Cleanup(c.Close)
		ctx := t.Context()
		if c.Era() != mcptest.Stateless {
			if _, err := c.Initialize(ctx); err != nil {
				t.Fatal(err)
			}
		}
		for _, text := range []string{"one", "two"} {
			if res, err := c.CallTool(ctx, "add_note", map[string]any{"text": text}); err != nil || res.IsError {
				t.Fatalf("%s add_note: %v %v", era.name, res, err)
			}
		}
		decision <- "approve"
		if res, err := c.CallTool(ctx, "delete_note", map[string]any{"id": "1"}); err != nil || res.IsError {
			t.Fatalf("%s approved delete_note: %+v %v", era.name, res, err)
		}
		decision <- "decline"
		if res, err := c.CallTool(ctx, "delete_note", map[string]any{"id": "2"}); err != nil || !res.IsError || !strings.Contains(res.Text(), "declined") {
			t.Fatalf("%s declined delete_note: %+v %v", era.name, res, err)
		}
	}

	// The lines: a call's is written once its response went out.
	var lines []map[string]any
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		lines = readAuditLines(t, path)
		if len(lines) >= 8 || time.Now().After(deadline) {
			break
		}
	}
	if len(lines) != 8 { // per era: two add_note, two delete_note
		t.Fatalf("%d lines, want 8: %v", len(lines), lines)
	}
	for _, era := range eras {
		for _, tc := range []struct{ id, decision, outcome string }{{"1", "approve", "confirmed"}, {"2", "decline", "declined"}} {
			sum := sha256.Sum256([]byte(`{"id":"` + tc.id + `"}`))
			var found []map[string]any
			for _, l := range lines {
				if l["tool"] == "delete_note" && l["tenant"] == era.org && l["argsDigest"] == hex.EncodeToString(sum[:]) {
					found = append(found, l)
				}
			}
			if len(found) != 1 {
				t.Fatalf("%s %s: %d lines, want 1", era.name, tc.decision, len(found))
			}
			l := found[0]
			want := map[string]any{"decision": "approve", "subject": "ed", "role": "editor", "by": "page",
				"deciderTenant": era.org, "deciderSubject": "ada", "deciderRole": "admin", "outcome": tc.outcome,
				"message": "Delete a note of workspace " + era.org + ", asked by ed.", "url": shownURL[era.org+"/"+tc.decision],
				"arguments": map[string]any{"id": tc.id}}
			for k, v := range want {
				if got, _ := json.Marshal(l[k]); string(got) != string(must(json.Marshal(v))) {
					t.Errorf("%s %s: %s = %s, want %v", era.name, tc.decision, k, got, v)
				}
			}
			if id, _ := l["approvalId"].(string); id == "" || l["url"] != srv.URL+"/approvals/"+id {
				t.Errorf("%s %s: approval %v at %v", era.name, tc.decision, l["approvalId"], l["url"])
			}
		}
		allowed := 0
		for _, l := range lines {
			if l["tool"] == "add_note" && l["tenant"] == era.org && l["by"] == "policy" && l["decision"] == "allow" && l["outcome"] == "allowed" {
				allowed++
			}
		}
		if allowed != 2 {
			t.Errorf("%s: %d lines of add_note allowed by the policy, want 2", era.name, allowed)
		}
	}
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

// readAuditLines reads the audit file: every line one JSON object with
// the record's members.
func readAuditLines(t *testing.T, path string) []map[string]any {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	members := []string{"approvalId", "argsDigest", "arguments", "asked", "by", "confirmId", "decided", "deciderRole", "deciderSubject",
		"deciderTenant", "decision", "form", "message", "outcome", "role", "sessionId", "subject", "taskId", "tenant", "tool", "url"}
	var out []map[string]any
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("line %q: %v", sc.Bytes(), err)
		}
		var names []string
		for k := range m {
			names = append(names, k)
		}
		slices.Sort(names)
		if !slices.Equal(names, members) {
			t.Fatalf("line members %v, want %v", names, members)
		}
		out = append(out, m)
	}
	return out
}
