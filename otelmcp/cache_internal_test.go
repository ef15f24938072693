package otelmcp

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/mcptest"
	"go.opentelemetry.io/otel/metric"
)

// A cache keeps at most its limit, keeps the first value stored for a key,
// and answers loads while stores run (run with -race).
func TestCacheBounded(t *testing.T) {
	c := cache[string, int]{limit: 100}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for i := range 300 {
				k := fmt.Sprint(i)
				if v, ok := c.load(k); ok && v != i {
					t.Errorf("%s: %d", k, v)
				}
				c.store(k, i)  // every goroutine stores the same value
				c.store(k, -1) // a second store of a kept key changes nothing
			}
		})
	}
	wg.Wait()
	if n := len(c.all()); n != 100 {
		t.Fatalf("%d kept, want the limit 100", n)
	}
	for k, v := range c.all() {
		if k != fmt.Sprint(v) {
			t.Fatalf("%s: %d", k, v)
		}
	}
}

// Ever new protocol versions (which the handler never gives: it serves a
// closed set) are one attribute value, _OTHER; ever new found tool names
// (a host whose tool set keeps changing) cannot grow the kept attribute
// sets past maxAttrSets, and each request still gets its own attributes,
// kept or not.
func TestAttrSetsBounded(t *testing.T) {
	m := newTestMetrics(t, 0)
	for n := range 300 {
		v := fmt.Sprintf("v%05d", n)
		set := m.opAttrs(&mcphandler.Request{Method: "ping", ProtocolVersion: v}, mcphandler.Result{}, "")
		attrs := metric.NewRecordConfig(set).Attributes()
		if got, _ := attrs.Value("mcp.protocol.version"); got.AsString() != mcphandler.Other {
			t.Fatalf("attributes of version %s: %v", v, attrs)
		}
	}
	if n := len(m.sets.all()); n != 1 {
		t.Fatalf("%d attribute sets kept for 300 versions, want 1", n)
	}
	for n := range maxAttrSets + 300 {
		tool := fmt.Sprintf("tool_%05d", n)
		set := m.opAttrs(&mcphandler.Request{Method: "tools/call", Target: tool, ProtocolVersion: mcphandler.Version20260728},
			mcphandler.Result{Found: true}, "")
		attrs := metric.NewRecordConfig(set).Attributes()
		if got, _ := attrs.Value("gen_ai.tool.name"); got.AsString() != tool {
			t.Fatalf("attributes of tool %s: %v", tool, attrs)
		}
	}
	if n := len(m.sets.all()); n != maxAttrSets {
		t.Fatalf("%d attribute sets kept, want the bound %d", n, maxAttrSets)
	}
}

// Every revision the handler serves (those server/discover lists, and the
// legacy 2024-11-05) is its own value of mcp.protocol.version; any other
// string is _OTHER.
func TestServedVersionsAreAttributes(t *testing.T) {
	c := mcptest.NewModern(t, mcphandler.New(mcphandler.Config{}))
	raw, err := c.Discover(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		SupportedVersions []string `json:"supportedVersions"`
	}
	if err := json.Unmarshal(raw, &d); err != nil || len(d.SupportedVersions) == 0 {
		t.Fatalf("server/discover: %s, %v", raw, err)
	}
	for _, v := range append(d.SupportedVersions, mcphandler.Version20241105) {
		if got := servedVersion(v); got != v {
			t.Errorf("served version %s is recorded as %q", v, got)
		}
	}
	for _, v := range []string{"2099-01-01", "2025-11-25 ", strings.Repeat("9", 300)} {
		if got := servedVersion(v); got != mcphandler.Other {
			t.Errorf("version %.20q is recorded as %.20q, want %s", v, got, mcphandler.Other)
		}
	}
}
