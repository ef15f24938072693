package otelmcp

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcphandler/mcphandler"
)

// BenchmarkMetricsBookkeeping is what otelmcp does for the metrics of
// one request besides the SDK's Record: find the attribute set, note the
// session. Every goroutine is another session, as under load.
func BenchmarkMetricsBookkeeping(b *testing.B) {
	m := newTestMetrics(b, time.Hour)
	b.ReportAllocs()
	b.SetParallelism(16)
	var n atomic.Int64
	b.RunParallel(func(pb *testing.PB) {
		sid := fmt.Sprint("session-", n.Add(1))
		req := &mcphandler.Request{Method: "tools/call", Target: "echo", SessionID: sid, ProtocolVersion: "2025-11-25", Start: time.Now()}
		m.seen(sid, req.ProtocolVersion, true, req.Start)
		for pb.Next() {
			m.opAttrs(req, mcphandler.Result{Outcome: "ok"}, "")
			m.seen(sid, req.ProtocolVersion, false, req.Start)
		}
	})
}
