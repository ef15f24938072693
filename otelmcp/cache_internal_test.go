package otelmcp

import (
	"fmt"
	"sync"
	"testing"

	"github.com/mcphandler/mcphandler"
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

// A client that sends ever new protocol versions (a stateless request's
// header) cannot grow the kept attribute sets past maxAttrSets; each
// request still gets its own attributes, kept or not.
func TestAttrSetsBounded(t *testing.T) {
	m := newTestMetrics(t, 0)
	for n := range maxAttrSets + 300 {
		v := fmt.Sprintf("v%05d", n)
		set := m.opAttrs(&mcphandler.Request{Method: "ping", ProtocolVersion: v}, mcphandler.Result{}, "")
		attrs := metric.NewRecordConfig(set).Attributes()
		got, _ := attrs.Value("mcp.protocol.version")
		if got.AsString() != v {
			t.Fatalf("attributes of version %s: %v", v, set)
		}
	}
	if n := len(m.sets.all()); n != maxAttrSets {
		t.Fatalf("%d attribute sets kept, want the bound %d", n, maxAttrSets)
	}
}
