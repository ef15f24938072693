package mcphandler_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/mcptest"
)

// listMetaClients are a client of h in each era, initialized.
func listMetaClients(t *testing.T, h *mcphandler.Handler) map[string]*mcptest.Client {
	t.Helper()
	legacy := mcptest.NewLegacy(t, legacyMux(h), "/sse", mcptest.WithToken("acme-viewer"))
	if _, err := legacy.Initialize(context.Background()); err != nil {
		t.Fatal(err)
	}
	return map[string]*mcptest.Client{
		"2025-11-25": connect(t, h, "acme-viewer"),
		"2026-07-28": mcptest.NewModern(t, h, mcptest.WithToken("acme-viewer")),
		"2024-11-05": legacy,
	}
}

// listMeta returns the _meta members of a tools/list result and its tools.
func listMeta(t *testing.T, c *mcptest.Client) (map[string]json.RawMessage, []string) {
	t.Helper()
	res, err := c.Call(context.Background(), "tools/list", nil)
	if err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	var r struct {
		Meta  map[string]json.RawMessage `json:"_meta"`
		Tools []struct {
			Name string `json:"name"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(res, &r); err != nil {
		t.Fatalf("tools/list result %s: %v", res, err)
	}
	var names []string
	for _, tl := range r.Tools {
		names = append(names, tl.Name)
	}
	return r.Meta, names
}

// A member added during ListTools is in the list result's _meta on every
// era: a _meta of its own on 2025 and 2024-11-05, next to serverInfo on
// 2026-07-28.
func TestAddListMeta(t *testing.T) {
	h := mcphandler.New(mcphandler.Config{
		Authenticate: bearer,
		ListTools: func(ctx context.Context) ([]mcphandler.Tool, error) {
			for _, m := range [][2]string{{"example.com/status", ` {"up": [1, 2]} `}, {"example.com/more", `"x"`}} {
				if err := mcphandler.AddListMeta(ctx, m[0], json.RawMessage(m[1])); err != nil && !errors.Is(err, mcphandler.ErrNotListing) {
					return nil, err
				}
			}
			return []mcphandler.Tool{echoTool}, nil
		},
	})
	defer h.Close()
	for era, c := range listMetaClients(t, h) {
		meta, names := listMeta(t, c)
		if string(meta["example.com/status"]) != `{"up": [1, 2]}` || string(meta["example.com/more"]) != `"x"` || len(names) != 1 {
			t.Errorf("%s: _meta %s, tools %v", era, meta, names)
		}
		_, info := meta["io.modelcontextprotocol/serverInfo"]
		if want := era == "2026-07-28"; info != want || len(meta) != 2+btoi(want) {
			t.Errorf("%s: _meta %s", era, meta)
		}
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Reserved, malformed, repeated, too many or too large members are
// refused with an error; the list goes out with the others, valid.
func TestAddListMetaRefused(t *testing.T) {
	big := json.RawMessage(`"` + strings.Repeat("x", 64<<10) + `"`)
	refused := []struct {
		key   string
		value string
	}{
		{"", `1`},
		{"status", `1`},                     // no prefix
		{"/status", `1`},                    // an empty prefix
		{"io.modelcontextprotocol/x", `1`},  // reserved (2025-11-25)
		{"modelcontextprotocol.io/x", `1`},  // reserved (2025-06-18)
		{"dev.mcp/x", `1`},                  // reserved
		{"com.MCP.tools/x", `1`},            // reserved, any case
		{"example..com/x", `1`},             // an empty label
		{"-example.com/x", `1`},             // a label starting with '-'
		{"example.com/-x", `1`},             // a name starting with '-'
		{"example.com/a b", `1`},            // a space
		{`example.com/a"b`, `1`},            // a quote
		{"example.com/x/y", `1`},            // two slashes
		{"example.com/ok", `{`},             // not JSON
		{"example.com/ok", ``},              // empty
		{"example.com/ok", `{"a":1,"a":2}`}, // a repeated key
		{"example.com/ok", `1 2`},           // two values
		{"example.com/big", string(big)},    // too large
		{"example.com/kept", `2`},           // set twice
	}
	var errs []error
	h := mcphandler.New(mcphandler.Config{
		Authenticate: bearer,
		ListTools: func(ctx context.Context) ([]mcphandler.Tool, error) {
			if err := mcphandler.AddListMeta(ctx, "example.com/kept", json.RawMessage(`1`)); err != nil {
				if !errors.Is(err, mcphandler.ErrNotListing) { // initialize's look at the tools
					t.Errorf("kept: %v", err)
				}
				return []mcphandler.Tool{echoTool}, nil
			}
			errs = errs[:0]
			for _, r := range refused {
				errs = append(errs, mcphandler.AddListMeta(ctx, r.key, json.RawMessage(r.value)))
			}
			// Up to 8 members in all: 7 more fit, the 9th does not.
			for i := range 8 {
				err := mcphandler.AddListMeta(ctx, fmt.Sprintf("example.com/n%d", i), json.RawMessage(`0`))
				if (err == nil) != (i < 7) {
					t.Errorf("member %d: %v", i+2, err)
				}
			}
			return []mcphandler.Tool{echoTool}, nil
		},
	})
	defer h.Close()
	for era, c := range listMetaClients(t, h) {
		meta, names := listMeta(t, c)
		for i, err := range errs {
			if err == nil || errors.Is(err, mcphandler.ErrNotListing) {
				t.Errorf("%s: %q = %.20q: %v", era, refused[i].key, refused[i].value, err)
			}
		}
		if string(meta["example.com/kept"]) != `1` || len(meta) != 8+btoi(era == "2026-07-28") || len(names) != 1 {
			t.Errorf("%s: _meta %s, tools %v", era, meta, names)
		}
	}
}

// Outside the building of a tools/list — a tools/call's lookup, another
// method, a list already answered, a context of no request — a member is
// refused with ErrNotListing and shows nowhere.
func TestAddListMetaOnlyWhileListing(t *testing.T) {
	var (
		mu    sync.Mutex
		got   []error
		saved context.Context
	)
	note := func(err error) {
		mu.Lock()
		got = append(got, err)
		mu.Unlock()
	}
	h := mcphandler.New(mcphandler.Config{
		Authenticate: bearer,
		ListTools: func(ctx context.Context) ([]mcphandler.Tool, error) {
			if err := mcphandler.AddListMeta(ctx, "example.com/probe", json.RawMessage(`true`)); err == nil {
				saved = ctx // a tools/list: keep its context for after
			} else {
				note(err) // initialize's look at the tools, the call's lookup
			}
			return []mcphandler.Tool{echoTool}, nil
		},
	})
	defer h.Close()
	c := connect(t, h, "acme-viewer")
	if meta, _ := listMeta(t, c); string(meta["example.com/probe"]) != "true" {
		t.Fatalf("_meta %s", meta)
	}
	res, err := c.Call(context.Background(), "tools/call", map[string]any{"name": "echo", "arguments": map[string]any{"text": "x"}})
	if err != nil || bytes.Contains(res, []byte("example.com/probe")) {
		t.Fatalf("tools/call: %s %v", res, err)
	}
	note(mcphandler.AddListMeta(saved, "example.com/late", json.RawMessage(`1`)))
	note(mcphandler.AddListMeta(context.Background(), "example.com/none", json.RawMessage(`1`)))
	mu.Lock()
	defer mu.Unlock()
	if len(got) < 3 {
		t.Fatalf("%d refusals noted: %v", len(got), got)
	}
	for _, err := range got {
		if !errors.Is(err, mcphandler.ErrNotListing) {
			t.Errorf("got %v, want ErrNotListing", err)
		}
	}
}

// Members added from many goroutines during ListTools all arrive once;
// one added after ListTools returned is refused, without a race.
func TestAddListMetaConcurrent(t *testing.T) {
	late := make(chan error, 1)
	release := make(chan struct{})
	h := mcphandler.New(mcphandler.Config{
		Authenticate: bearer,
		ListTools: func(ctx context.Context) ([]mcphandler.Tool, error) {
			if mcphandler.AddListMeta(ctx, "example.com/first", json.RawMessage(`0`)) != nil {
				return nil, nil // initialize's look at the tools
			}
			var wg sync.WaitGroup
			for i := range 6 {
				wg.Go(func() {
					if err := mcphandler.AddListMeta(ctx, fmt.Sprintf("example.com/g%d", i), json.RawMessage(`1`)); err != nil {
						t.Error(err)
					}
				})
			}
			wg.Wait()
			go func() {
				<-release
				late <- mcphandler.AddListMeta(ctx, "example.com/late", json.RawMessage(`1`))
			}()
			return []mcphandler.Tool{echoTool}, nil
		},
	})
	defer h.Close()
	meta, _ := listMeta(t, connect(t, h, "acme-viewer"))
	close(release)
	if len(meta) != 7 {
		t.Fatalf("_meta %s", meta)
	}
	if err := <-late; !errors.Is(err, mcphandler.ErrNotListing) {
		t.Fatalf("a member after the list: %v", err)
	}
}

// A list to which nothing was added is written as before: no _meta on
// 2025 and 2024-11-05, serverInfo alone on 2026-07-28.
func TestListWithoutMetaUnchanged(t *testing.T) {
	h := mcphandler.New(mcphandler.Config{
		Authenticate: bearer,
		ListTools:    func(ctx context.Context) ([]mcphandler.Tool, error) { return []mcphandler.Tool{echoTool}, nil },
	})
	defer h.Close()
	for era, c := range listMetaClients(t, h) {
		m, _, err := c.CallOnce(context.Background(), "tools/list", nil)
		if err != nil || m.Error != nil {
			t.Fatalf("%s: %v %v", era, m, err)
		}
		want := `{"tools":[`
		if era == "2026-07-28" {
			want = `{"resultType":"complete","ttlMs":`
			i := bytes.Index(m.Result, []byte(`"_meta":{"io.modelcontextprotocol/serverInfo":{`))
			if j := bytes.Index(m.Result, []byte(`}},"tools":[`)); i < 0 || j < i || bytes.Contains(m.Result[i:j], []byte(`},"`)) {
				t.Errorf("%s: %s", era, m.Result)
			}
		}
		if !bytes.HasPrefix(m.Result, []byte(want)) {
			t.Errorf("%s: %s", era, m.Result)
		}
	}
}

// LimitListTTL lowers the ttlMs of a 2026-07-28 list to the smallest limit
// asked for, never raises it past Config.CacheTTL, counts a negative limit
// as 0, and answers ErrNotListing outside a tools/list (a tools/call's
// lookup), where it changes nothing.
func TestLimitListTTL(t *testing.T) {
	for _, tc := range []struct {
		limits []time.Duration
		want   int64
	}{
		{nil, 60000},
		{[]time.Duration{10 * time.Second, 5 * time.Second, 7 * time.Second}, 5000},
		{[]time.Duration{time.Hour}, 60000},
		{[]time.Duration{-time.Second, time.Second}, 0},
		{[]time.Duration{1500 * time.Millisecond}, 1500},
	} {
		var outside []error
		var mu sync.Mutex
		h := mcphandler.New(mcphandler.Config{
			Authenticate: bearer,
			CacheTTL:     time.Minute,
			ListTools: func(ctx context.Context) ([]mcphandler.Tool, error) {
				for _, d := range tc.limits {
					if err := mcphandler.LimitListTTL(ctx, d); err != nil {
						mu.Lock()
						outside = append(outside, err)
						mu.Unlock()
					}
				}
				return []mcphandler.Tool{echoTool}, nil
			},
		})
		defer h.Close()
		modern := mcptest.NewModern(t, h, mcptest.WithToken("acme-viewer"))
		res, err := modern.Call(context.Background(), "tools/list", nil)
		if err != nil {
			t.Fatal(err)
		}
		var r struct {
			TTL   *int64 `json:"ttlMs"`
			Scope string `json:"cacheScope"`
		}
		if err := json.Unmarshal(res, &r); err != nil || r.TTL == nil || *r.TTL != tc.want || r.Scope != "private" {
			t.Errorf("limits %v: %s (want ttlMs %d)", tc.limits, res, tc.want)
		}
		if len(outside) != 0 {
			t.Fatalf("limits %v: refused while listing: %v", tc.limits, outside)
		}
		// A call's lookup runs ListTools too, building no list.
		if _, err := modern.CallTool(context.Background(), "echo", map[string]any{"text": "x"}); err != nil {
			t.Fatal(err)
		}
		if len(tc.limits) > 0 && (len(outside) != len(tc.limits) || !errors.Is(outside[0], mcphandler.ErrNotListing)) {
			t.Errorf("limits %v: outside a list got %v", tc.limits, outside)
		}
		// The 2025 revisions have no cache hints: the list is as without it.
		res, err = connect(t, h, "acme-viewer").Call(context.Background(), "tools/list", nil)
		if err != nil || bytes.Contains(res, []byte("ttlMs")) {
			t.Errorf("limits %v: 2025 list %s %v", tc.limits, res, err)
		}
	}
	if err := mcphandler.LimitListTTL(context.Background(), time.Second); !errors.Is(err, mcphandler.ErrNotListing) {
		t.Errorf("outside any request: %v", err)
	}
}
