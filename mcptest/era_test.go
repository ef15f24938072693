package mcptest

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"
)

// counting counts the HTTP requests that reach h.
type counting struct {
	h http.Handler
	n atomic.Int32
}

func (c *counting) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c.n.Add(1)
	c.h.ServeHTTP(w, r)
}

// eraServer is a fake server of one era: the path of its endpoint, the
// first tool it lists and the options it expects.
type eraServer struct {
	era  Era
	h    http.Handler
	path string
	tool string
	opts []Option
}

func eraServers(t *testing.T) []eraServer {
	legacy := newLegacyFake(t)
	t.Cleanup(legacy.wg.Wait) // runs after the clients and the servers are closed
	return []eraServer{
		{Sessions, newFake(t), "/", "echo", nil},
		{Stateless, newModernFake(t), "/", "confirm", nil},
		{SSE, legacy, "/sse", "confirm", []Option{WithClientInfo("old", "1"), WithCapabilities([]byte(`{"elicitation":{}}`))}},
	}
}

// TestOneClientEveryEra: one Client type, its era an option, lists tools
// on a server of each era with the same calls, and each era's own way of
// starting (initialize, or none).
func TestOneClientEveryEra(t *testing.T) {
	for _, tc := range eraServers(t) {
		t.Run(tc.era.String(), func(t *testing.T) {
			c := New(t, tc.h, append(tc.opts, WithEra(tc.era), WithPath(tc.path))...)
			if c.Era() != tc.era {
				t.Fatalf("Era() = %v", c.Era())
			}
			_, err := c.Initialize(t.Context())
			if tc.era == Stateless {
				if !errors.Is(err, errors.ErrUnsupported) {
					t.Fatalf("Initialize of a stateless client: %v, want ErrUnsupported", err)
				}
			} else if err != nil {
				t.Fatalf("Initialize: %v", err)
			}
			tools, err := c.ListTools(t.Context())
			if err != nil || len(tools) == 0 || tools[0].Name != tc.tool {
				t.Fatalf("ListTools: %v, %v", tools, err)
			}
			if c.Rounds() != 1 {
				t.Errorf("Rounds() = %d after a one-round call", c.Rounds())
			}
			m, _, err := c.CallOnce(t.Context(), "tools/list", nil)
			if err != nil || m.Result == nil || !m.IsResponse() {
				t.Fatalf("CallOnce: %+v, %v", m, err)
			}
		})
	}
}

// TestEraUnsupported: a method that has no meaning in the client's era
// fails with errors.ErrUnsupported and sends nothing.
func TestEraUnsupported(t *testing.T) {
	ctx := context.Background()
	methods := map[string]func(c *Client) error{
		"Initialize": func(c *Client) error { _, err := c.Initialize(ctx); return err },
		"Connect":    func(c *Client) error { return c.Connect(ctx) },
		"OpenStream": func(c *Client) error { _, err := c.OpenStream(ctx); return err },
		"Resume":     func(c *Client) error { _, err := c.Resume(ctx, "1"); return err },
		"Delete":     func(c *Client) error { return c.Delete(ctx) },
		"Batch":      func(c *Client) error { _, err := c.Batch(ctx, BatchRequest{Method: "ping"}); return err },
		"Listen":     func(c *Client) error { _, err := c.Listen(ctx, nil); return err },
		"Retry":      func(c *Client) error { _, err := c.Retry(ctx, "tools/call", nil, nil, "s"); return err },
	}
	unsupported := map[Era][]string{
		Sessions:  {"Connect", "Listen", "Retry"},
		Stateless: {"Initialize", "Connect", "OpenStream", "Resume", "Delete", "Batch"},
		SSE:       {"OpenStream", "Resume", "Delete", "Batch", "Listen", "Retry"},
	}
	for _, tc := range eraServers(t) {
		t.Run(tc.era.String(), func(t *testing.T) {
			h := &counting{h: tc.h}
			c := New(t, h, WithEra(tc.era), WithPath(tc.path))
			for _, name := range unsupported[tc.era] {
				if err := methods[name](c); !errors.Is(err, errors.ErrUnsupported) {
					t.Errorf("%s: %v, want errors.ErrUnsupported", name, err)
				}
			}
			if n := h.n.Load(); n != 0 {
				t.Errorf("unsupported methods sent %d requests", n)
			}
			if c.MessageURL() != "" {
				t.Errorf("MessageURL %q before connecting", c.MessageURL())
			}
		})
	}
}

// TestShorthands: NewModern, NewLegacy, DialModern and DialLegacy are New
// and Dial with the era (and for SSE the path) set, whatever the options
// say.
func TestShorthands(t *testing.T) {
	if c := NewModern(t, newModernFake(t), WithEra(SSE)); c.Era() != Stateless {
		t.Errorf("NewModern made a %v client", c.Era())
	}
	if c := NewLegacy(t, newLegacyFake(t), "/sse", WithPath("/other")); c.Era() != SSE || c.SSEURL() != c.URL() || c.URL()[len(c.URL())-4:] != "/sse" {
		t.Errorf("NewLegacy made a %v client for %q", c.Era(), c.URL())
	}
	if c := DialModern("http://127.0.0.1:1/"); c.Era() != Stateless || c.ProtocolVersion() != ModernProtocolVersion {
		t.Errorf("DialModern: %v %q", c.Era(), c.ProtocolVersion())
	}
	if c := DialLegacy("http://127.0.0.1:1/sse"); c.Era() != SSE || c.ProtocolVersion() != "" {
		t.Errorf("DialLegacy: %v %q", c.Era(), c.ProtocolVersion())
	}
	if c := Dial("http://127.0.0.1:1/"); c.Era() != Sessions {
		t.Errorf("Dial: %v", c.Era())
	}
	if got := Era(7).String(); got != "Era(7)" {
		t.Errorf("Era(7).String() = %q", got)
	}
}
