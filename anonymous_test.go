package mcphandler_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/mcptest"
)

// warnings returns the Warn records in a JSON log.
func warnings(t *testing.T, log string) []string {
	t.Helper()
	var out []string
	for line := range strings.Lines(log) {
		var rec struct {
			Level string `json:"level"`
			Msg   string `json:"msg"`
		}
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if rec.Level == "WARN" {
			out = append(out, rec.Msg)
		}
	}
	return out
}

// A Config without Authenticate serves everyone as one anonymous caller:
// it still works (the zero Config serves), but New says so, once, naming
// the fix. InsecureAnonymous serves the same anonymous caller on purpose,
// without the warning, on every era.
func TestAnonymousIsLoudOrExplicit(t *testing.T) {
	for _, tc := range []struct {
		name string
		auth mcphandler.AuthenticateFunc
		warn bool
	}{
		{"no Authenticate", nil, true},
		{"InsecureAnonymous", mcphandler.InsecureAnonymous, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var log syncBuffer
			var mu sync.Mutex
			var seen []mcphandler.Identity
			h := mcphandler.New(mcphandler.Config{
				Authenticate: tc.auth,
				Logger:       slog.New(slog.NewJSONHandler(&log, nil)),
				ListTools: func(ctx context.Context) ([]mcphandler.Tool, error) {
					id, _ := mcphandler.IdentityFrom(ctx)
					mu.Lock()
					seen = append(seen, id)
					mu.Unlock()
					return []mcphandler.Tool{echoTool}, nil
				},
			})
			w := warnings(t, log.String())
			switch {
			case tc.warn && (len(w) != 1 || !strings.Contains(w[0], "Config.Authenticate") || !strings.Contains(w[0], "InsecureAnonymous")):
				t.Fatalf("New warned %q, want one warning naming Config.Authenticate and InsecureAnonymous", w)
			case !tc.warn && len(w) != 0:
				t.Fatalf("New warned %q", w)
			}
			ctx := context.Background()
			for _, c := range []*mcptest.Client{
				connect(t, h, "anyone"),
				mcptest.NewModern(t, h, mcptest.WithToken("someone else")),
			} {
				res, err := c.CallTool(ctx, "echo", map[string]any{"text": "hi"})
				if err != nil || res.IsError {
					t.Fatalf("%v: %v %v", c.Era(), res, err)
				}
			}
			mu.Lock()
			defer mu.Unlock()
			for _, id := range seen {
				if id.Tenant != "" || id.Subject != "" || id.Role != "" {
					t.Fatalf("a caller was served as %+v, want the zero Identity", id)
				}
			}
			if len(warnings(t, log.String())) != len(w) {
				t.Fatal("serving requests warned again")
			}
		})
	}
}
