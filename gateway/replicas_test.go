package gateway_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/gateway"
	"github.com/mcphandler/mcphandler/mcptest"
	"github.com/mcphandler/mcphandler/session/redisstore"
	"github.com/mcphandler/mcphandler/session/redisstore/redistest"
)

// gwReplica is one replica of a gateway: a Handler with a Gateway of its
// own, served by an httptest server of its own, on a Redis store of its
// own client under the test's prefix (the same StateKeys as every
// replica). Its requests upstream go through a dialer of its own and are
// counted, so that killing it cuts them and a test can tell which
// replica called upstream.
type gwReplica struct {
	name   string
	gh     *gatewayHost
	srv    *httptest.Server
	client redis.UniversalClient
	store  *redisstore.Store
	dialer *cutDialer
	calls  atomic.Int64 // tools/call POSTs it sent upstream
	tr     *replicaTransport
	down   atomic.Bool
}

// newReplicas returns two replicas, A and B, of a gateway in front of the
// upstream docs spoken to in era, sharing one Redis.
func newReplicas(t *testing.T, docs *fakeUpstream, era gateway.Era) (a, b *gwReplica) {
	t.Helper()
	prefix := redistest.Prefix(t, redistest.Client(t)) // its own client: replicas die
	mk := func(name string) *gwReplica {
		r := &gwReplica{name: name, client: redistest.Client(t), dialer: &cutDialer{}}
		r.store = redisstore.New(r.client, redisstore.Options{Prefix: prefix, OpTimeout: 500 * time.Millisecond})
		t.Cleanup(func() { r.store.Close() })
		r.tr = &replicaTransport{calls: &r.calls, next: &http.Transport{DialContext: r.dialer.dial}}
		hc := &http.Client{Transport: r.tr}
		r.gh = newGateway(t, gateway.Config{
			Upstreams: upstreamsFor(map[string]*fakeUpstream{"docs": docs}, era),
			Store:     r.store, StateKeys: testKeys, HTTPClient: hc,
		}, func(c *mcphandler.Config) { c.Store, c.StateKeys = r.store, testKeys })
		r.srv = httptest.NewServer(r.gh.h)
		t.Cleanup(r.srv.Close)
		return r
	}
	return mk("A"), mk("B")
}

// kill takes the replica down as a crash would (crash), then closes its
// server and Handler. It fails t if a request the replica was serving
// does not end once its connections are cut.
func (r *gwReplica) kill(t *testing.T) {
	r.crash()
	closed := make(chan struct{})
	go func() { r.srv.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Errorf("replica %s: a request still runs 10 s after its connections were cut", r.name)
	}
	r.gh.h.Close()
	r.store.Close()
}

// crash cuts the replica off at once: it reaches neither Redis nor its
// upstreams any more, and its clients' connections drop. It waits for
// nothing, so a request of the replica's own may call it.
func (r *gwReplica) crash() {
	r.down.Store(true)
	r.client.Close() // first: a dead replica writes nothing more to Redis
	r.dialer.cut()   // its calls upstream are cut
	r.srv.CloseClientConnections()
}

// cutDialer dials TCP and remembers its connections, until cut closes
// them all and refuses new ones.
type cutDialer struct {
	mu    sync.Mutex
	conns []net.Conn
	done  bool
}

var errCut = errors.New("the replica is down")

func (d *cutDialer) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.done {
		c.Close()
		return nil, errCut
	}
	d.conns = append(d.conns, c)
	return c, nil
}

func (d *cutDialer) cut() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.done = true
	for _, c := range d.conns {
		c.Close()
	}
}

// replicaTransport counts the tools/call requests a replica sends
// upstream, and lets a test act as each request goes (hold: a non-nil
// error fails the request instead).
type replicaTransport struct {
	calls *atomic.Int64
	hold  atomic.Pointer[func(body []byte) error]
	next  http.RoundTripper
}

func (rt *replicaTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		body, err := io.ReadAll(r.Body)
		r.Body.Close()
		if err != nil {
			return nil, err
		}
		if bytes.Contains(body, []byte(`"method":"tools/call"`)) {
			rt.calls.Add(1)
		}
		if h := rt.hold.Load(); h != nil {
			if err := (*h)(body); err != nil {
				return nil, err
			}
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	return rt.next.RoundTrip(r)
}

// router sends each request of a client to replica A or B, as pick says
// from the request and its body; a request picked for a replica that is
// down goes to the other one, as a balancer's would.
type router struct {
	a, b *gwReplica
	pick func(r *http.Request, body []byte) *gwReplica
	tr   *http.Transport

	mu   sync.Mutex
	sent []string // "A tools/call", "B response", ... in order
	last struct { // the last request sent to B
		hdr  http.Header
		body []byte
	}
}

func newRouter(t *testing.T, a, b *gwReplica, pick func(r *http.Request, body []byte) *gwReplica) *router {
	rt := &router{a: a, b: b, pick: pick, tr: &http.Transport{}}
	t.Cleanup(rt.tr.CloseIdleConnections)
	return rt
}

func (rt *router) RoundTrip(r *http.Request) (*http.Response, error) {
	var body []byte
	if r.Body != nil {
		var err error
		body, err = io.ReadAll(r.Body)
		r.Body.Close()
		if err != nil {
			return nil, err
		}
	}
	to := rt.pick(r, body)
	if to.down.Load() {
		to = map[*gwReplica]*gwReplica{rt.a: rt.b, rt.b: rt.a}[to]
	}
	u, _ := url.Parse(to.srv.URL)
	r = r.Clone(r.Context())
	r.URL.Scheme, r.URL.Host, r.Host = u.Scheme, u.Host, u.Host
	r.Body = io.NopCloser(bytes.NewReader(body))
	rt.mu.Lock()
	rt.sent = append(rt.sent, to.name+" "+kindOf(r, body))
	if to == rt.b {
		rt.last.hdr, rt.last.body = r.Header.Clone(), body
	}
	rt.mu.Unlock()
	return rt.tr.RoundTrip(r)
}

// kindOf names a request for the router's record.
func kindOf(r *http.Request, body []byte) string {
	switch {
	case r.Method != http.MethodPost:
		return r.Method
	case isResponse(body):
		return "response"
	case bytes.Contains(body, []byte(`"inputResponses"`)):
		return "retry"
	case bytes.Contains(body, []byte(`"method":"tools/call"`)):
		return "tools/call"
	}
	return "other"
}

// isResponse reports whether body is a JSON-RPC response: the client's
// answer to a question.
func isResponse(body []byte) bool {
	return !bytes.Contains(body, []byte(`"method"`)) && (bytes.Contains(body, []byte(`"result"`)) || bytes.Contains(body, []byte(`"error"`)))
}

func (rt *router) record() []string {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return append([]string(nil), rt.sent...)
}

// answersToB sends the client's answers to B, everything else to A.
func answersToB(a, b *gwReplica) func(*http.Request, []byte) *gwReplica {
	return func(r *http.Request, body []byte) *gwReplica {
		if r.Method == http.MethodPost && isResponse(body) {
			return b
		}
		return a
	}
}

// retriesToB sends the 2026-07-28 retries carrying answers to B,
// everything else to A.
func retriesToB(a, b *gwReplica) func(*http.Request, []byte) *gwReplica {
	return func(r *http.Request, body []byte) *gwReplica {
		if bytes.Contains(body, []byte(`"inputResponses"`)) {
			return b
		}
		return a
	}
}

// dialRouted returns a client of the replicas through rt, initialized
// when it is a 2025-11-25 one.
func dialRouted(t *testing.T, rt *router, modern bool, opts ...mcptest.Option) *mcptest.Client {
	t.Helper()
	opts = append([]mcptest.Option{mcptest.WithToken("acme-admin"), mcptest.WithHTTPClient(&http.Client{Transport: rt})}, opts...)
	if modern {
		c := mcptest.DialModern("http://gateway.test/", opts...)
		t.Cleanup(c.Close)
		return c
	}
	c := mcptest.Dial("http://gateway.test/", opts...)
	t.Cleanup(c.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.Initialize(ctx); err != nil {
		t.Fatal(err)
	}
	return c
}

// upstreamEras are the eras the gateway speaks to the upstream in, for a
// 2025-11-25 client: the upstream's question comes mid-call (2025), or as
// a round the gateway answers itself by retrying upstream (2026-07-28).
var upstreamEras = []struct {
	era   gateway.Era
	calls int64 // the tools/call POSTs upstream of a call that asked once
}{{gateway.EraSessions, 1}, {gateway.EraStateless, 2}}

// A 2025-11-25 client's answer to an upstream's question, posted to
// another replica than the one running the call, reaches the upstream:
// the call completes with the upstream's result, the upstream's tool acts
// once, and only the replica running the call called upstream.
func TestReplicasAnswerThroughAnother(t *testing.T) {
	for _, ue := range upstreamEras {
		t.Run(string(ue.era), func(t *testing.T) {
			docs := newUpstream(t, upstreamTool{name: "search", readOnly: true, ask: true})
			a, b := newReplicas(t, docs, ue.era)
			rt := newRouter(t, a, b, answersToB(a, b))
			ans := &answerer{}
			c := dialRouted(t, rt, false, mcptest.WithElicitationHandler(ans.handler()))
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			defer cancel()
			res, err := c.CallTool(ctx, "docs_search", map[string]any{"q": "x"})
			if err != nil || res.IsError {
				t.Fatalf("%+v %v (requests %q)", res, err, rt.record())
			}
			if got := resultText(res); got != `search ran for upstream-acme args={"q":"x"} answer=accept` {
				t.Fatalf("result %q", got)
			}
			if n, calls := docs.count("search"), docs.sawMethod("tools/call"); n != 1 || calls != int(ue.calls) {
				t.Fatalf("the upstream tool acted %d times over %d calls; want once over %d", n, calls, ue.calls)
			}
			if q := ans.questions(); len(q) != 1 || q[0] != "Sure?" {
				t.Fatalf("asked %q", q)
			}
			if !containsString(rt.record(), "B response") {
				t.Fatalf("the answer did not go to B: %q", rt.record())
			}
			if na, nb := a.calls.Load(), b.calls.Load(); na != ue.calls || nb != 0 {
				t.Fatalf("tools/call upstream: %d from A, %d from B; want %d from A only", na, nb, ue.calls)
			}
		})
	}
}

// A 2026-07-28 client and a 2026-07-28 upstream: the round relayed by
// replica A is retried, answered, on replica B, which completes it with
// the upstream's result, the upstream's tool acting once; the same retry
// replayed to A afterwards runs nothing upstream.
func TestReplicasRelayedRoundRetriedOnAnother(t *testing.T) {
	docs := newUpstream(t, upstreamTool{name: "search", readOnly: true, ask: true})
	a, b := newReplicas(t, docs, gateway.EraStateless)
	rt := newRouter(t, a, b, retriesToB(a, b))
	c := dialRouted(t, rt, true, mcptest.WithElicitationHandler((&answerer{}).handler()))
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	res, err := c.CallTool(ctx, "docs_search", map[string]any{"q": "x"})
	if err != nil || res.IsError {
		t.Fatalf("%+v %v (requests %q)", res, err, rt.record())
	}
	want := `search ran for upstream-acme args={"q":"x"} answer=accept`
	if got := resultText(res); got != want {
		t.Fatalf("result %q", got)
	}
	if got := rt.record(); len(got) != 2 || got[0] != "A tools/call" || got[1] != "B retry" {
		t.Fatalf("requests %q, want the call on A, its retry on B", got)
	}
	if n, calls := docs.count("search"), docs.sawMethod("tools/call"); n != 1 || calls != 2 {
		t.Fatalf("the upstream tool acted %d times over %d calls; want once over 2", n, calls)
	}
	if na, nb := a.calls.Load(), b.calls.Load(); na != 1 || nb != 1 {
		t.Fatalf("tools/call upstream: %d from A, %d from B; want the question from A, the answer from B", na, nb)
	}

	// The retry replayed, byte for byte, to A.
	rt.mu.Lock()
	hdr, body := rt.last.hdr, rt.last.body
	rt.mu.Unlock()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, a.srv.URL, bytes.NewReader(body))
	req.Header = hdr
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	replay, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	t.Logf("the replay on A: %d %s", resp.StatusCode, replay)
	if n, calls := docs.count("search"), docs.sawMethod("tools/call"); n != 1 || calls != 2 || a.calls.Load() != 1 {
		t.Fatalf("after the replay on A, the upstream tool acted %d times over %d calls (%d from A); want once over 2",
			n, calls, a.calls.Load())
	}
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(replay), strings.ReplaceAll(want, `"`, `\"`)) {
		t.Fatalf("the replay on A is not the recorded result: %d %s", resp.StatusCode, replay)
	}
}

// The replica that asked a 2025-11-25 client the upstream's question dies
// before the answer comes; the answer goes to replica B. Nothing runs
// twice: the upstream's tool does not act, B calls nothing upstream, and
// the client's call ends at once with B's refusal of the answer nobody
// waits for (HTTP 400), not a hang.
func TestReplicasAskerKilledMidQuestion(t *testing.T) {
	for _, ue := range upstreamEras {
		t.Run(string(ue.era), func(t *testing.T) {
			docs := newUpstream(t, upstreamTool{name: "search", readOnly: true, ask: true})
			a, b := newReplicas(t, docs, ue.era)
			rt := newRouter(t, a, b, answersToB(a, b))
			var asked atomic.Int32
			c := dialRouted(t, rt, false, mcptest.WithElicitationHandler(
				func(ctx context.Context, p mcptest.ElicitParams) (mcptest.ElicitResult, error) {
					asked.Add(1)
					a.kill(t)
					return mcptest.ElicitResult{Action: "accept", Content: map[string]any{"sure": true}}, nil
				}))
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			defer cancel()
			res, err := c.CallTool(ctx, "docs_search", nil)
			t.Logf("the call: %+v %v (requests %q)", res, err, rt.record())
			if asked.Load() != 1 {
				t.Fatalf("asked %d times", asked.Load())
			}
			if ctx.Err() != nil {
				t.Fatalf("the call hung: %v", err)
			}
			var he *mcptest.HTTPError
			if !errors.As(err, &he) || he.Status != http.StatusBadRequest || !strings.Contains(string(he.Body), "no request is waiting") {
				t.Fatalf("the call ended with %+v %v; want B's 400 to the answer nobody waits for", res, err)
			}
			if !containsString(rt.record(), "B response") {
				t.Fatalf("the answer did not go to B: %q", rt.record())
			}
			time.Sleep(200 * time.Millisecond) // what still goes upstream lands
			if n := docs.count("search"); n != 0 {
				t.Fatalf("the upstream tool acted %d times; its question was never answered", n)
			}
			if na, nb := a.calls.Load(), b.calls.Load(); na != 1 || nb != 0 {
				t.Fatalf("tools/call upstream: %d from A, %d from B; want the one from A", na, nb)
			}
		})
	}
}

// A 2026-07-28 client and upstream: the replica that relayed the round
// dies between the rounds; the retry, on B, completes the call with the
// upstream's result, the upstream's tool acting once.
func TestReplicasRelayedRoundAfterAskerKilled(t *testing.T) {
	docs := newUpstream(t, upstreamTool{name: "search", readOnly: true, ask: true})
	a, b := newReplicas(t, docs, gateway.EraStateless)
	rt := newRouter(t, a, b, retriesToB(a, b))
	var asked atomic.Int32
	c := dialRouted(t, rt, true, mcptest.WithElicitationHandler(
		func(ctx context.Context, p mcptest.ElicitParams) (mcptest.ElicitResult, error) {
			asked.Add(1)
			a.kill(t)
			return mcptest.ElicitResult{Action: "accept", Content: map[string]any{"sure": true}}, nil
		}))
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	res, err := c.CallTool(ctx, "docs_search", nil)
	if err != nil || res.IsError || asked.Load() != 1 {
		t.Fatalf("%+v %v, asked %d (requests %q)", res, err, asked.Load(), rt.record())
	}
	if got := resultText(res); got != `search ran for upstream-acme args={} answer=accept` {
		t.Fatalf("result %q", got)
	}
	if got := rt.record(); len(got) != 2 || got[0] != "A tools/call" || got[1] != "B retry" {
		t.Fatalf("requests %q, want the call on A, its retry on B", got)
	}
	if n, calls := docs.count("search"), docs.sawMethod("tools/call"); n != 1 || calls != 2 {
		t.Fatalf("the upstream tool acted %d times over %d calls; want once over 2", n, calls)
	}
}

// A 2025-11-25 client's answer and the asking replica's death at the
// same instant, swept across a few delays: whatever comes first, the
// upstream's tool acts at most once, exactly once when the client was
// told the call succeeded, B never calls upstream, and the client's call
// ends (a result, B's refusal of the answer, or its stream cut: the
// client does not resume, see TestReplicasAnswerReachedAskerThenKilled).
func TestReplicasAnswerAsAskerDies(t *testing.T) {
	delays := []time.Duration{0, 500 * time.Microsecond, time.Millisecond, 2 * time.Millisecond, 5 * time.Millisecond,
		10 * time.Millisecond, 25 * time.Millisecond}
	for _, ue := range upstreamEras {
		for _, d := range delays {
			t.Run(fmt.Sprint(ue.era, "/", d), func(t *testing.T) {
				docs := newUpstream(t, upstreamTool{name: "search", readOnly: true, ask: true})
				a, b := newReplicas(t, docs, ue.era)
				rt := newRouter(t, a, b, answersToB(a, b))
				killed := make(chan struct{})
				var once sync.Once
				c := dialRouted(t, rt, false, mcptest.WithAutoResume(false), mcptest.WithElicitationHandler(
					func(ctx context.Context, p mcptest.ElicitParams) (mcptest.ElicitResult, error) {
						once.Do(func() {
							go func() {
								defer close(killed)
								time.Sleep(d)
								a.kill(t)
							}()
						})
						return mcptest.ElicitResult{Action: "accept", Content: map[string]any{"sure": true}}, nil
					}))
				ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
				defer cancel()
				res, err := c.CallTool(ctx, "docs_search", nil)
				<-killed
				if ctx.Err() != nil {
					t.Fatalf("the call hung: %v (requests %q) acted=%d", err, rt.record(), docs.count("search"))
				}
				ok := err == nil && !res.IsError
				time.Sleep(200 * time.Millisecond) // what still goes upstream lands
				n := docs.count("search")
				t.Logf("ok=%v acted=%d err=%v requests=%q", ok, n, err, rt.record())
				switch {
				case n > 1:
					t.Fatalf("the upstream tool acted %d times", n)
				case ok && n != 1:
					t.Fatalf("the client was told it ran, the upstream acted %d times", n)
				case b.calls.Load() != 0:
					t.Fatalf("B called upstream %d times", b.calls.Load())
				}
			})
		}
	}
}

// The client's answer reached the asking replica A through B, and A dies
// before it goes upstream. Nothing runs twice: the upstream's tool does
// not act and B calls nothing upstream; the client, which does not
// resume, gets its cut stream as the call's error.
func TestReplicasAnswerReachedAskerThenKilled(t *testing.T) {
	for _, ue := range upstreamEras {
		t.Run(string(ue.era), func(t *testing.T) {
			docs := newUpstream(t, upstreamTool{name: "search", readOnly: true, ask: true})
			a, b := newReplicas(t, docs, ue.era)
			rt := newRouter(t, a, b, answersToB(a, b))
			var crashed atomic.Bool
			hold := func(body []byte) error {
				// The answer on its way upstream: a response (2025), or
				// the retry carrying it (2026-07-28).
				if isResponse(body) || bytes.Contains(body, []byte(`"inputResponses"`)) {
					crashed.Store(true)
					a.crash()
					return errCut
				}
				return nil
			}
			a.tr.hold.Store(&hold)
			c := dialRouted(t, rt, false, mcptest.WithAutoResume(false), mcptest.WithElicitationHandler((&answerer{}).handler()))
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			defer cancel()
			res, err := c.CallTool(ctx, "docs_search", nil)
			t.Logf("the call: %+v %v (requests %q)", res, err, rt.record())
			if !crashed.Load() {
				t.Fatal("the answer never reached A")
			}
			a.kill(t)
			if ctx.Err() != nil {
				t.Fatalf("the call hung: %v", err)
			}
			if !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, syscall.ECONNRESET) {
				t.Fatalf("the call ended with %+v %v; want its stream cut", res, err)
			}
			time.Sleep(200 * time.Millisecond) // what still goes upstream lands
			if n := docs.count("search"); n != 0 {
				t.Fatalf("the upstream tool acted %d times; the answer never reached it", n)
			}
			if na, nb := a.calls.Load(), b.calls.Load(); na != ue.calls || nb != 0 {
				t.Fatalf("tools/call upstream: %d from A, %d from B; want %d from A only", na, nb, ue.calls)
			}
		})
	}
}

// A 2026-07-28 client's retry of a relayed round sent to both replicas at
// once while A dies, swept across a few delays: the upstream's tool acts
// at most once, exactly once when either retry was answered with the
// result, and neither retry hangs.
func TestReplicasRetryAsAskerDies(t *testing.T) {
	delays := []time.Duration{0, 500 * time.Microsecond, time.Millisecond, 2 * time.Millisecond, 5 * time.Millisecond,
		10 * time.Millisecond, 25 * time.Millisecond}
	for _, d := range delays {
		t.Run(fmt.Sprint(d), func(t *testing.T) {
			docs := newUpstream(t, upstreamTool{name: "search", readOnly: true, ask: true})
			a, b := newReplicas(t, docs, gateway.EraStateless)
			ask := mcptest.WithElicitationHandler((&answerer{}).handler())
			at := func(r *gwReplica) *mcptest.Client {
				c := mcptest.DialModern(r.srv.URL, mcptest.WithToken("acme-admin"), ask)
				t.Cleanup(c.Close)
				return c
			}
			ca, cb := at(a), at(b)
			args := map[string]any{"q": "x"}
			state := firstRound(t, ca, "docs_search", args)
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			defer cancel()
			var wg sync.WaitGroup
			var ok atomic.Int32
			wg.Go(func() {
				time.Sleep(d)
				a.kill(t)
			})
			for name, c := range map[string]*mcptest.Client{"A": ca, "B": cb} {
				wg.Go(func() {
					m, _, err := c.CallOnce(ctx, "tools/call", answered("docs_search", args, "upstream/1/elicit-1", state))
					if err == nil && m.Error == nil && strings.Contains(string(m.Result), "search ran for") {
						ok.Add(1)
					}
					var r string
					if m != nil {
						r = string(m.Result)
					}
					t.Logf("the retry on %s: %v %s", name, err, r)
				})
			}
			wg.Wait()
			if ctx.Err() != nil {
				t.Fatal("a retry hung")
			}
			time.Sleep(200 * time.Millisecond) // what still goes upstream lands
			switch n := docs.count("search"); {
			case n > 1:
				t.Fatalf("the upstream tool acted %d times", n)
			case ok.Load() > 0 && n != 1:
				t.Fatalf("%d retries were answered with the result, the upstream acted %d times", ok.Load(), n)
			}
		})
	}
}
