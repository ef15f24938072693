package otelmcp_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/mcptest"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// maxValueBytes is the most bytes the attacker may make any value of the
// telemetry hold: a span attribute, a status message, a metric attribute.
// maxSpanName is the most a span name may hold: a method and a target,
// each cut to 128 bytes.
const (
	maxValueBytes = 256
	maxSpanName   = 2*128 + 1
)

// attackEras are the two eras an attacker's client may speak, with a name
// size each can carry: a 2026-07-28 request repeats its method and name in
// headers, which the HTTP server bounds to 1 MiB.
var attackEras = []struct {
	era  mcptest.Era
	huge int
}{{mcptest.Sessions, 1 << 20}, {mcptest.Stateless, 256 << 10}}

// attackClient is an initialized client of era for token.
func attackClient(t *testing.T, url string, era mcptest.Era, token string) *mcptest.Client {
	t.Helper()
	c := mcptest.Dial(url, mcptest.WithEra(era), mcptest.WithToken(token))
	t.Cleanup(c.Close)
	if era == mcptest.Sessions {
		if _, err := c.Initialize(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// flakyTools makes ListTools and ListPrompts fail for the subject
// "acme-flaky": a backend outage, during which a tools/call or prompts/get
// finds nothing and fails with -32603 rather than -32602. It also serves
// one resource.
func flakyTools(cfg mcphandler.Config) mcphandler.Config {
	cfg.Logger = slog.New(slog.DiscardHandler)
	cfg.ListResources = func(context.Context) ([]mcphandler.Resource, error) {
		return []mcphandler.Resource{{URI: "file:///readme", Name: "readme"}}, nil
	}
	cfg.ReadResource = func(context.Context, *mcphandler.ResourceRequest) ([]mcphandler.ResourceContents, error) {
		return []mcphandler.ResourceContents{{URI: "file:///readme", Text: "hi"}}, nil
	}
	tools, prompts := cfg.ListTools, cfg.ListPrompts
	flaky := func(ctx context.Context) bool {
		id, _ := mcphandler.IdentityFrom(ctx)
		return id.Subject == "acme-flaky"
	}
	cfg.ListTools = func(ctx context.Context) ([]mcphandler.Tool, error) {
		if flaky(ctx) {
			return nil, errors.New("backend down")
		}
		return tools(ctx)
	}
	cfg.ListPrompts = func(ctx context.Context) ([]mcphandler.Prompt, error) {
		if flaky(ctx) {
			return nil, errors.New("backend down")
		}
		return prompts(ctx)
	}
	return cfg
}

// attackRequests sends n requests of each kind whose every name is new:
// unknown methods (half with a progressToken over MaxIDBytes, which used
// to be refused before the method was looked up), tools and prompts that
// do not exist (also while ListTools and ListPrompts fail), and resources
// that do not exist. name(i) is the i-th name.
func attackRequests(t *testing.T, url string, era mcptest.Era, n int, name func(i int) string) (sent int) {
	t.Helper()
	ctx := context.Background()
	c := attackClient(t, url, era, "acme-alice")
	flaky := attackClient(t, url, era, "acme-flaky")
	token := strings.Repeat("t", 300)
	for i := range n {
		meta := map[string]any{}
		if i%2 == 0 {
			meta["progressToken"] = token
		}
		c.CallOnce(ctx, "x/"+name(i), map[string]any{"_meta": meta})
		c.CallOnce(ctx, "tools/call", map[string]any{"name": name(i), "arguments": map[string]any{}})
		c.CallOnce(ctx, "prompts/get", map[string]any{"name": name(i)})
		c.CallOnce(ctx, "resources/read", map[string]any{"uri": "file:///" + name(i)})
		flaky.CallOnce(ctx, "tools/call", map[string]any{"name": name(i), "arguments": map[string]any{}})
		flaky.CallOnce(ctx, "prompts/get", map[string]any{"name": name(i)})
		sent += 6
	}
	return sent
}

// durations returns the data points of mcp.server.operation.duration and
// how many requests they count.
func durations(t *testing.T, o *obs) ([]metricdata.HistogramDataPoint[float64], uint64) {
	t.Helper()
	ms := o.collect(t)
	if _, ok := ms["mcp.server.operation.duration"]; !ok {
		return nil, 0
	}
	p := histogram(t, ms, "mcp.server.operation.duration")
	var n uint64
	for _, dp := range p {
		n += dp.Count
	}
	return p, n
}

// checkBounded fails for any value of the telemetry o holds past the
// bounds, and for a tool or prompt name among the metric attributes.
func checkBounded(t *testing.T, o *obs) {
	t.Helper()
	bad := 0
	report := func(format string, args ...any) {
		if bad++; bad <= 5 {
			t.Errorf(format, args...)
		}
	}
	for _, s := range o.rec.Ended() {
		if len(s.Name()) > maxSpanName {
			report("a span name of %d bytes: %.60q…", len(s.Name()), s.Name())
		}
		if d := s.Status().Description; len(d) > maxValueBytes {
			report("span %.60q: a status message of %d bytes", s.Name(), len(d))
		}
		for _, kv := range s.Attributes() {
			if v := kv.Value.Emit(); len(v) > maxValueBytes {
				report("span %.60q: attribute %s of %d bytes", s.Name(), kv.Key, len(v))
			}
		}
	}
	p, _ := durations(t, o)
	for _, dp := range p {
		for _, kv := range dp.Attributes.ToSlice() {
			v := kv.Value.Emit()
			if len(v) > maxValueBytes {
				report("a metric attribute %s of %d bytes", kv.Key, len(v))
			}
			if (kv.Key == "gen_ai.tool.name" || kv.Key == "gen_ai.prompt.name") && v != "echo" && v != "greet" {
				report("a metric attribute %s=%.40q the server does not have", kv.Key, v)
			}
			if kv.Key == "mcp.method.name" && strings.HasPrefix(v, "x/") {
				report("a metric attribute %s=%.40q the server does not serve", kv.Key, v)
			}
		}
	}
}

// The attacker, one authenticated caller, sends 100 requests of each kind
// with ever new names: unknown methods (with and without an oversized
// progressToken), unknown tools, prompts and resources, and the same tool
// and prompt names while the host's ListTools and ListPrompts fail. On
// both eras, mcp.server.operation.duration keeps a handful of series —
// one per method the server serves or _OTHER, per error.type — and no
// value of a span or a metric exceeds its bound.
func TestAttackNamesMakeNoSeries(t *testing.T) {
	for _, era := range attackEras {
		t.Run(era.era.String(), func(t *testing.T) {
			o := newObs(t)
			srv := httptest.NewServer(mcphandler.New(flakyTools(o.config())))
			defer srv.Close()
			const n = 100
			sent := attackRequests(t, srv.URL, era.era, n, func(i int) string { return fmt.Sprintf("nosuch_%d", i) })
			var p []metricdata.HistogramDataPoint[float64]
			eventually(t, fmt.Sprintf("%d durations", sent), func() bool {
				var got uint64
				p, got = durations(t, o)
				return got >= uint64(sent)
			})
			series := map[string]bool{}
			for _, dp := range p {
				if value(dp.Attributes, "mcp.method.name") != "initialize" {
					series[attrString(dp.Attributes)] = true
				}
			}
			t.Logf("%s: %d requests, %d series: %v", era.era, sent, len(series), series)
			// x/… with -32601; tools/call and prompts/get with -32602 and
			// with -32603; resources/read with its not-found code.
			if len(series) > 6 {
				t.Errorf("%d series for %d requests of 6 kinds, want at most 6", len(series), sent)
			}
			checkBounded(t, o)
		})
	}
}

func attrString(s attribute.Set) string {
	var b strings.Builder
	for _, kv := range s.ToSlice() {
		fmt.Fprintf(&b, "%s=%.40s ", kv.Key, kv.Value.Emit())
	}
	return b.String()
}

// heapInUse is the live heap after a full collection.
func heapInUse() uint64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// The attacker sends the same requests with names of 1 MiB (256 KiB on
// 2026-07-28, whose headers repeat them). Spans kept by the processor and
// the meter provider's series hold none of those bytes: the live heap
// grows by far less than the names sent, and every value stays bounded.
func TestAttackHugeNamesRetainNothing(t *testing.T) {
	for _, era := range attackEras {
		t.Run(era.era.String(), func(t *testing.T) {
			o := newObs(t)
			srv := httptest.NewServer(mcphandler.New(flakyTools(o.config())))
			defer srv.Close()
			n := 8
			if raceEnabled {
				n = 2 // the race detector makes each megabyte slow to parse
			}
			huge := strings.Repeat("n", era.huge)
			before := heapInUse()
			sent := attackRequests(t, srv.URL, era.era, n, func(i int) string { return fmt.Sprintf("%d_%s", i, huge) })
			eventually(t, fmt.Sprintf("%d durations", sent), func() bool {
				_, got := durations(t, o)
				return got >= uint64(sent)
			})
			after := heapInUse()
			names := uint64(sent * era.huge)
			grown := int64(after) - int64(before)
			t.Logf("%s: %d requests naming %d MiB in all; the live heap grew by %.1f MiB (%d spans kept)",
				era.era, sent, names>>20, float64(grown)/(1<<20), len(o.rec.Ended()))
			if grown > int64(names/8)+1<<20 { // a MiB for what the GC leaves either way
				t.Errorf("the live heap grew by %d MiB after requests naming %d MiB: the telemetry keeps the names", grown>>20, names>>20)
			}
			checkBounded(t, o)
			runtime.KeepAlive(o)
		})
	}
}
