package otelmcp_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/mcphandler/mcphandler"
	"go.opentelemetry.io/otel/trace"
)

// FuzzMeta feeds arbitrary params._meta to the interceptor: it must not
// panic, must call next once, and the span's parent is either a valid
// trace context from _meta or the ambient span.
func FuzzMeta(f *testing.F) {
	for _, s := range []string{
		`{"traceparent":"` + traceparent + `","tracestate":"` + remoteState + `","baggage":"` + remoteBagage + `"}`,
		`{"traceparent":42}`, `{"traceparent":null}`, `{"traceparent":"00-zz"}`, `[]`, `"x"`, `{}`,
		`{"baggage":"a=b,c=d;p=1","tracestate":"a=1,b=2,a=3"}`, `{"traceparent":"00-` + remoteTrace + `-` + remoteSpan + `-01","traceparent":"x"}`,
	} {
		f.Add([]byte(s))
	}
	o := newObs(f)
	ambientCtx, ambient := o.tp.Tracer("http").Start(context.Background(), "HTTP POST")
	defer ambient.End()
	f.Fuzz(func(t *testing.T, meta []byte) {
		o.rec.Reset()
		req := &mcphandler.Request{Method: "tools/call", Target: "echo", ID: json.RawMessage("1"), Meta: meta, Start: time.Now()}
		calls := 0
		var parent trace.SpanContext
		o.icp(ambientCtx, req, func(ctx context.Context) mcphandler.Result {
			calls++
			parent = trace.SpanContextFromContext(ctx)
			return mcphandler.Result{}
		})
		if calls != 1 {
			t.Fatalf("next called %d times", calls)
		}
		if !parent.IsValid() {
			t.Fatalf("no span in the context passed on")
		}
	})
}
