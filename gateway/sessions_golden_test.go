package gateway

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/gateway/internal/upstream"
	"github.com/mcphandler/mcphandler/internal/golden"
	"github.com/mcphandler/mcphandler/session"
)

// The golden files of testdata/golden hold, byte for byte, what a replica
// keeps of an upstream session: the store keys of a slot and of its
// owner's index (a MAC under a key derived from StateKeys), and the
// payload it seals there (package internal/seal pins the sealing,
// package internal/ownerindex the index). Replicas of two releases share
// kept sessions during a rolling upgrade: each case builds its bytes with
// fixed keys and inputs, compares them with its file, then opens the
// file's payload, sealed, as a replica would.
//
// go test -run TestGolden -update rewrites the files: only for a change
// that says how mixed releases still interoperate.

var (
	goldenKeys  = [][]byte{[]byte("mcphandler golden key, 32 bytes!")}
	goldenNow   = time.UnixMilli(1_785_231_000_000) // 2026-07-28T09:30:00Z
	goldenAlice = mcphandler.Identity{Tenant: "acme", Subject: "alice"}
)

func goldenKeeper(t *testing.T) *keeper {
	t.Helper()
	k, err := newKeeper(&Config{Store: session.NewMemory(), StateKeys: goldenKeys, MaxUpstreamSessions: 2, Logger: slog.New(slog.DiscardHandler)}, goldenKeys,
		func() time.Time { return goldenNow })
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func goldenSlots(k *keeper) []slot {
	h := http.Header{"Authorization": {"Bearer upstream-acme"}}
	return []slot{
		k.slotFor(PerSession, goldenAlice, "SESSIONID", "docs", "https://docs.example/mcp", h, nil),
		k.slotFor(PerPerson, goldenAlice, "", "docs", "https://docs.example/mcp", h, json.RawMessage(`{"elicitation":{"form":{}}}`)),
	}
}

// TestGolden pins the keys and the sealed payload of a kept session; see
// the comment at the top of this file.
func TestGolden(t *testing.T) {
	k := goldenKeeper(t)
	var keys []byte
	for _, sl := range goldenSlots(k) {
		keys = append(keys, sl.key+" "+sl.owner+"\n"...)
	}
	golden.File(t, "kept-session-keys.golden", keys)

	ks := upstream.Session{ID: "UPSTREAM-SESSION-1", Version: "2025-11-25", Logging: true, LogLevel: "info"}
	p, _ := json.Marshal(kept{ID: ks.ID, Version: ks.Version, Logging: ks.Logging, LogLevel: ks.LogLevel, Written: goldenNow.UnixMilli()})
	p = golden.File(t, "kept-session-payload.golden", p)

	// What the file holds, sealed in a slot, opens as that session on a
	// replica of this release, and in no other slot.
	ctx := context.Background()
	sls := goldenSlots(k)
	tok, err := k.keys.Seal(sls[0].bind, p, goldenNow.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	for _, sl := range sls {
		if _, err := k.store.PutIfAbsent(ctx, sl.key, []byte(tok), time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	v, _, err := k.load(ctx, sls[0])
	if err != nil || v == nil || v.session() != ks || v.Written != goldenNow.UnixMilli() {
		t.Fatalf("opened %+v, %v; want %+v", v, err, ks)
	}
	if v, raw, err := k.load(ctx, sls[1]); v != nil || raw == nil || err != nil {
		t.Fatalf("another slot opened it: %+v %v", v, err)
	}
}
