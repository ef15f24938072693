package gateway

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/mcphandler/mcphandler/gateway/internal/upstream"
	"github.com/mcphandler/mcphandler/internal/costguard"
	"github.com/mcphandler/mcphandler/session"
)

// FuzzStoredList: what a list's sealed payload holds, had a replica (or
// a holder of the keys) written anything, is read without a panic, in
// time linear in its size, as no list or as a list of a known era whose
// every tool has a name and its definition; a list saved reads back the
// same.
func FuzzStoredList(f *testing.F) {
	now := time.Date(2026, 9, 1, 12, 0, 0, 0, time.UTC)
	cfg := Config{Store: session.NewMemory(), MaxCachedLists: 16, ListTTL: time.Minute, Grace: time.Minute,
		MaxResponseBytes: 1 << 20, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	s, err := newListStore(&cfg, [][]byte{[]byte("0123456789abcdef0123456789abcdef")}, func() time.Time { return now })
	if err != nil {
		f.Fatal(err)
	}
	ctx := context.Background()
	ref := s.ref("acme", "https://up.test/mcp", nil, EraDetect, nil)
	saved := &list{era: upstream.Stateless, version: "2026-07-28", fetched: now, fresh: time.Minute,
		tools: []upstream.Tool{{Name: "search", Def: json.RawMessage(`{"name":"search","inputSchema":{"type":"object"}}`)}}}
	s.save(ctx, ref, saved, nil)
	got, _, err := s.load(ctx, ref)
	if err != nil || got == nil || len(got.tools) != 1 || got.tools[0].Name != "search" || string(got.tools[0].Def) != string(saved.tools[0].Def) ||
		got.era != saved.era || got.version != saved.version || !got.fetched.Equal(saved.fetched) || got.fresh != saved.fresh || got.invalid {
		f.Fatalf("saved %+v, read %+v, %v", saved, got, err)
	}
	for _, seed := range []string{
		`{"e":2,"v":"2026-07-28","f":0,"t":60000,"g":"","l":[{"name":"a"}]}`,
		`{"e":9,"l":[]}`, `{"e":1,"l":[{"name":""}]}`, `{"e":3,"l":[{"Name":"x","name":"y"}]}`, `[]`, `null`, `{"e":2,"l":[1,"x",null]}`,
	} {
		f.Add([]byte(seed))
	}
	key := s.storeKey(ref)
	f.Fuzz(func(t *testing.T, in []byte) {
		tok, err := s.keys.Seal(bind(ref, key), in, now.Add(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		old, _ := cfg.Store.Load(ctx, key) // the store of s: each input replaces the last
		if _, err := cfg.Store.CompareAndSwap(ctx, key, old, []byte(tok), time.Hour); err != nil {
			t.Fatal(err)
		}
		var l *list
		costguard.Check(t, len(in), func() { l, _, err = s.load(ctx, ref) })
		if err != nil || l == nil {
			return
		}
		if l.era < upstream.Sessions || l.era > upstream.Legacy {
			t.Fatalf("era %v", l.era)
		}
		for _, tl := range l.tools {
			if tl.Name == "" || !json.Valid(tl.Def) {
				t.Fatalf("tool %q %s", tl.Name, tl.Def)
			}
		}
	})
}
