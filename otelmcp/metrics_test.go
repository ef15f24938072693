package otelmcp_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/mcptest"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// sum returns the int64 sum of name at the point whose key k is v.
func sum(t *testing.T, ms map[string]metricdata.Metrics, name, k, v string) int64 {
	t.Helper()
	m, ok := ms[name]
	if !ok {
		return 0
	}
	s, ok := m.Data.(metricdata.Sum[int64])
	if !ok {
		t.Fatalf("%s is %T, want an int64 sum", name, m.Data)
	}
	var n int64
	for _, p := range s.DataPoints {
		if k == "" || value(p.Attributes, k) == v {
			n += p.Value
		}
	}
	return n
}

func TestOperationDuration(t *testing.T) {
	o := newObs(t)
	srv := httptest.NewServer(mcphandler.New(o.config()))
	defer srv.Close()
	c := mcptest.DialModern(srv.URL, mcptest.WithToken("acme-alice"))
	defer c.Close()
	ctx := context.Background()
	for range 3 {
		if _, err := c.CallTool(ctx, "echo", nil); err != nil {
			t.Fatal(err)
		}
	}
	c.CallTool(ctx, "sad", nil)
	c.CallTool(ctx, "nosuch", nil)
	// The unknown tool's name, which any client can vary, is left out.
	want := map[string]uint64{"echo/": 3, "sad/tool_error": 1, "/-32602": 1}
	var got map[string]uint64
	eventually(t, "5 tools/call durations", func() bool {
		got = map[string]uint64{}
		for _, p := range histogram(t, o.collect(t), "mcp.server.operation.duration") {
			if value(p.Attributes, "mcp.method.name") != "tools/call" {
				continue
			}
			if value(p.Attributes, "mcp.protocol.version") != mcphandler.Version20260728 || value(p.Attributes, "gen_ai.operation.name") != "execute_tool" {
				t.Errorf("point attributes %v", p.Attributes)
			}
			if _, ok := p.Attributes.Value("mcp.session.id"); ok {
				t.Errorf("a session id in a metric: %v", p.Attributes)
			}
			got[value(p.Attributes, "gen_ai.tool.name")+"/"+value(p.Attributes, "error.type")] += p.Count
		}
		return len(got) == len(want) && got["echo/"] == 3 && got["sad/tool_error"] == 1 && got["/-32602"] == 1
	})
}

func TestSessionMetrics(t *testing.T) {
	o := newObs(t)
	srv := httptest.NewServer(mcphandler.New(o.config()))
	defer srv.Close()
	ctx := context.Background()
	c := mcptest.Dial(srv.URL, mcptest.WithToken("acme-alice"))
	defer c.Close()
	if _, err := c.Initialize(ctx); err != nil {
		t.Fatal(err)
	}
	other := mcptest.Dial(srv.URL, mcptest.WithToken("acme-bob"))
	defer other.Close()
	if _, err := other.Initialize(ctx); err != nil {
		t.Fatal(err)
	}
	eventually(t, "two open sessions", func() bool { return sum(t, o.collect(t), "mcphandler.server.sessions", "", "") == 2 })
	// A GET stream is open while it is.
	st, err := c.OpenStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "one open stream", func() bool {
		return sum(t, o.collect(t), "mcphandler.server.streams", "mcphandler.stream", "get") == 1
	})
	st.Close()
	eventually(t, "the stream closed", func() bool {
		return sum(t, o.collect(t), "mcphandler.server.streams", "mcphandler.stream", "get") == 0
	})
	// A DELETE of another's session ends nothing and records nothing.
	forged := mcptest.Dial(srv.URL, mcptest.WithToken("acme-mallory"))
	forged.SetSessionID(c.SessionID())
	forged.SetProtocolVersion(c.ProtocolVersion())
	if err := forged.Delete(ctx); err == nil {
		t.Fatal("deleted another identity's session")
	}
	time.Sleep(20 * time.Millisecond)
	if _, ok := o.collect(t)["mcp.server.session.duration"]; ok {
		t.Fatal("a session duration recorded for a refused DELETE")
	}
	time.Sleep(30 * time.Millisecond)
	if err := c.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	eventually(t, "one session duration", func() bool {
		ms := o.collect(t)
		if _, ok := ms["mcp.server.session.duration"]; !ok {
			return false
		}
		p := histogram(t, ms, "mcp.server.session.duration")
		return len(p) == 1 && p[0].Count == 1 && p[0].Sum >= 0.05 && p[0].Sum < 10 &&
			value(p[0].Attributes, "mcp.protocol.version") == mcphandler.Version20251125
	})
	if n := sum(t, o.collect(t), "mcphandler.server.sessions", "", ""); n != 1 {
		t.Fatalf("%d open sessions after one DELETE, want 1", n)
	}
}

func TestListenStreams(t *testing.T) {
	o := newObs(t)
	srv := httptest.NewServer(mcphandler.New(o.config()))
	defer srv.Close()
	c := mcptest.DialModern(srv.URL, mcptest.WithToken("acme-alice"))
	defer c.Close()
	ctx, cancel := context.WithCancel(context.Background())
	l, err := c.Listen(ctx, map[string]any{"toolsListChanged": true})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "one open listen stream", func() bool {
		return sum(t, o.collect(t), "mcphandler.server.streams", "mcphandler.stream", "listen") == 1
	})
	cancel()
	l.Close()
	eventually(t, "the listen stream closed", func() bool {
		return sum(t, o.collect(t), "mcphandler.server.streams", "mcphandler.stream", "listen") == 0
	})
}

func TestConfirmsByOutcome(t *testing.T) {
	for _, era := range []mcptest.Era{mcptest.Sessions, mcptest.Stateless} {
		t.Run(era.String(), func(t *testing.T) {
			o := newObs(t)
			srv := httptest.NewServer(mcphandler.New(o.config()))
			defer srv.Close()
			ctx := context.Background()
			for _, action := range []string{"accept", "decline", "accept"} {
				c := mcptest.Dial(srv.URL, mcptest.WithEra(era), mcptest.WithToken("acme-alice"),
					mcptest.WithElicitationHandler(func(context.Context, mcptest.ElicitParams) (mcptest.ElicitResult, error) {
						if action != "accept" {
							return mcptest.ElicitResult{Action: action}, nil
						}
						return mcptest.ElicitResult{Action: action, Content: map[string]any{"confirm": true}}, nil
					}))
				if era == mcptest.Sessions {
					if _, err := c.Initialize(ctx); err != nil {
						t.Fatal(err)
					}
				}
				if _, err := c.CallTool(ctx, "delete_thing", nil); err != nil {
					t.Fatal(err)
				}
				c.Close()
			}
			eventually(t, "2 confirmed and 1 declined", func() bool {
				ms := o.collect(t)
				return sum(t, ms, "mcphandler.server.confirms", "mcphandler.outcome", "confirmed") == 2 &&
					sum(t, ms, "mcphandler.server.confirms", "mcphandler.outcome", "declined") == 1 &&
					sum(t, ms, "mcphandler.server.confirms", "", "") == 3
			})
		})
	}
}

// A client that sends many tool names, prompt names and methods that do
// not exist makes no new metric series: only what the server knows is an
// attribute value.
func TestMetricCardinalityBounded(t *testing.T) {
	o := newObs(t)
	srv := httptest.NewServer(mcphandler.New(o.config()))
	defer srv.Close()
	c := mcptest.DialModern(srv.URL, mcptest.WithToken("acme-alice"))
	defer c.Close()
	ctx := context.Background()
	for i := range 50 {
		n := fmt.Sprintf("nosuch_%d", i)
		c.CallTool(ctx, n, nil)
		c.Call(ctx, "prompts/get", map[string]any{"name": n})
		c.Call(ctx, "x/"+n, map[string]any{})
	}
	var points int
	eventually(t, "150 durations", func() bool {
		var n uint64
		p := histogram(t, o.collect(t), "mcp.server.operation.duration")
		for _, dp := range p {
			n += dp.Count
		}
		points = len(p)
		return n == 150
	})
	if points != 3 {
		t.Fatalf("%d series for 3 kinds of refused request, want 3", points)
	}
}
