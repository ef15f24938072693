package mcphandler_test

import (
	"context"
	"testing"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/mcptest"
	"github.com/mcphandler/mcphandler/session/redisstore"
	"github.com/mcphandler/mcphandler/session/redisstore/redistest"
)

// TestLegacyPostOutlivesItsConnection: a legacy POST is answered 202 with
// Connection: close before it is served, so its client may hang up at
// once; the work must go on regardless. On a store that honours contexts
// (Redis) the initialize's session update, and then calls, failed when the
// client closed the connection first.
func TestLegacyPostOutlivesItsConnection(t *testing.T) {
	c := redistest.Client(t)
	st := redisstore.New(c, redisstore.Options{Prefix: redistest.Prefix(t, c)})
	t.Cleanup(func() { st.Close() })
	f := &fixture{}
	cfg := f.config()
	cfg.Store = st
	cfg.StateKeys = [][]byte{[]byte("0123456789abcdef0123456789abcdef")}
	h := mcphandler.New(cfg)
	t.Cleanup(func() { h.Close() })
	mux := legacyMux(h)
	ctx := context.Background()
	for i := range 20 {
		lc := mcptest.NewLegacy(t, mux, "/sse", mcptest.WithToken("acme-viewer"))
		if _, err := lc.Initialize(ctx); err != nil {
			t.Fatalf("initialize %d: %v", i, err)
		}
		if res, err := lc.CallTool(ctx, "read", nil); err != nil || res.IsError {
			t.Fatalf("call %d: %+v %v", i, res, err)
		}
		lc.Close()
	}
}
