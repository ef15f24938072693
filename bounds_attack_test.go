package mcphandler_test

// Attacks by one identity on what it can make the handler keep: records
// in the store (confirms of both eras), event logs of a session's POST
// streams, and requests that go on running after their client left. Each
// kind has a bound with a default; past it the identity gets a clear
// error (or, for what is only an optimisation, goes without it), and no
// other identity is affected. SPEC.md's table "What one identity can make
// the handler keep" lists every kind and names these tests.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/mcptest"
	"github.com/mcphandler/mcphandler/session"
	"github.com/mcphandler/mcphandler/session/redisstore"
	"github.com/mcphandler/mcphandler/session/redisstore/redistest"
)

// defaultMaxConfirms is the default of Config.Limits.MaxConfirmsPerIdentity.
const defaultMaxConfirms = 100

// tooManyConfirms reports whether err is the refusal of a confirm past
// the bound of its identity: -32000 saying how many are held.
func tooManyConfirms(code int, msg string, max int) bool {
	return code == int(mcphandler.CodeRateLimited) &&
		strings.Contains(msg, fmt.Sprintf("%d confirmations held, at most %d", max, max))
}

// TestAttackConfirmsPerIdentity: one identity asks for confirmation of
// call after call, through two replicas, and never answers (2026-07-28:
// each first round makes a nonce record, and the client never retries)
// or answers at once (2025: each call makes a confirm record, kept after
// its decision). Past the default bound, the next confirm is refused
// with -32000 saying how many are held, on every replica, before any
// record is written; another identity is not affected; the store holds
// no more confirm records of the identity than the bound.
//
// On main every one of them was asked, and kept for ConfirmTimeout plus a
// minute after its last change.
func TestAttackConfirmsPerIdentity(t *testing.T) {
	const max = defaultMaxConfirms
	records := func(l *lab, prefix string) int {
		n := 0
		for _, r := range l.reps {
			n += len(r.st.keys(prefix))
		}
		return n
	}
	t.Run("2026-07-28", func(t *testing.T) {
		eachStore(t, func(t *testing.T, stores func(int) session.Store) {
			l := newLab(t, labOptions{replicas: 2, store: stores})
			first := func(token string, i int) (int, map[string]any) {
				status, _, b := modernPost(t, l.reps[i%2].srv, token,
					modernBody(i, "tools/call", fmt.Sprintf(`"name":"delete_thing","arguments":{"i":%d}`, i), `{"elicitation":{}}`), nil)
				var m map[string]any
				if err := json.Unmarshal(b, &m); err != nil {
					t.Fatalf("call %d: %d %q", i, status, b)
				}
				return status, m
			}
			for i := range max {
				if _, m := first("acme-viewer", i); m["result"] == nil {
					t.Fatalf("first round %d: %v", i, m)
				} else if keys, _ := inputRound(m); len(keys) != 1 {
					t.Fatalf("first round %d is not a question: %v", i, m)
				}
			}
			for i := max; i < max+2; i++ { // through both replicas
				_, m := first("acme-viewer", i)
				e, _ := m["error"].(map[string]any)
				code, _ := e["code"].(float64)
				msg, _ := e["message"].(string)
				if !tooManyConfirms(int(code), msg, max) {
					t.Fatalf("one confirm more: %v", m)
				}
			}
			if _, m := first("acme-admin", 0); m["result"] == nil {
				t.Fatalf("another identity: %v", m)
			}
			if n := records(l, "nonce/"); n != max+1 {
				t.Fatalf("%d nonce records written, want %d", n, max+1)
			}
		})
	})
	t.Run("2025-11-25", func(t *testing.T) {
		eachStore(t, func(t *testing.T, stores func(int) session.Store) {
			l := newLab(t, labOptions{replicas: 2, store: stores})
			clients := func(token string) []*mcptest.Client {
				var urls []string
				for _, r := range l.reps {
					urls = append(urls, r.srv.URL)
				}
				return oneSession(t, urls, mcptest.WithToken(token),
					mcptest.WithElicitationHandler(func(context.Context, mcptest.ElicitParams) (mcptest.ElicitResult, error) {
						return mcptest.ElicitResult{Action: "decline"}, nil
					}))
			}
			alice := clients("acme-viewer")
			call := func(cs []*mcptest.Client, i int) (*mcptest.ToolResult, error) {
				return cs[i%2].CallTool(context.Background(), "delete_thing", map[string]any{"i": i})
			}
			for i := range max {
				res, err := call(alice, i)
				if err != nil || !res.IsError || !strings.Contains(res.Text(), "declined") {
					t.Fatalf("call %d: %+v %v", i, res, err)
				}
			}
			for i := max; i < max+2; i++ {
				_, err := call(alice, i)
				var re *mcptest.RPCError
				if !errors.As(err, &re) || !tooManyConfirms(int(re.Code), re.Message, max) {
					t.Fatalf("one confirm more: %v", err)
				}
			}
			if res, err := call(clients("acme-admin"), 0); err != nil || !strings.Contains(res.Text(), "declined") {
				t.Fatalf("another identity: %+v %v", res, err)
			}
			if n := records(l, "confirm/"); n != max+1 {
				t.Fatalf("%d confirm records written, want %d", n, max+1)
			}
			if n := l.count(0); n != 0 {
				t.Fatalf("ran %d times", n)
			}
		})
	})
}

// oneSession opens one session through the first of urls (replicas
// sharing a store) and returns a client of it for each, none resuming on
// its own.
func oneSession(t *testing.T, urls []string, opts ...mcptest.Option) []*mcptest.Client {
	t.Helper()
	var cs []*mcptest.Client
	for _, u := range urls {
		c := mcptest.Dial(u, append(opts, mcptest.WithAutoResume(false))...)
		t.Cleanup(c.Close)
		if len(cs) == 0 {
			if _, err := c.Initialize(context.Background()); err != nil {
				t.Fatal(err)
			}
		} else {
			c.SetSessionID(cs[0].SessionID())
			c.SetProtocolVersion(cs[0].ProtocolVersion())
		}
		cs = append(cs, c)
	}
	return cs
}

// modernRefusal returns the code and message of a 2026-07-28 answer's
// error (0 and "" for a result).
func modernRefusal(m map[string]any) (int, string) {
	e, _ := m["error"].(map[string]any)
	code, _ := e["code"].(float64)
	msg, _ := e["message"].(string)
	return int(code), msg
}

// TestAttackApprovalRoundsPerIdentity: the approvals of an identity are
// bounded (approval.Config.MaxPendingPerIdentity), but the same call
// repeated while its one approval is pending finds that approval, and
// each repetition made a record of its own: a 2026-07-28 first round a
// nonce, a 2025-11-25 URL-mode wait a confirm record. They count against
// the identity's confirms like any: past the bound the repetition is
// refused with -32000, and the store holds no more.
func TestAttackApprovalRoundsPerIdentity(t *testing.T) {
	const max = defaultMaxConfirms
	rig := newApprovalRig(t, 2, 5*time.Second, func(c *mcphandler.Config) { c.OnCall = nil })
	ctx := context.Background()
	nonces := func() int {
		keys, err := rig.cl.replicas[0].client.Keys(ctx, rig.prefix+"{nonce/*").Result()
		if err != nil {
			t.Fatal(err)
		}
		return len(keys)
	}
	caps := `{"elicitation":{"url":{}}}`
	for i := range max {
		status, m := postModern(t, rig.cl.proxy.URL, "acme-viewer", i, `"name":"delete_thing","arguments":{"id":"x"}`, caps)
		if keys, _ := inputRound(m); status != 200 || len(keys) != 1 {
			t.Fatalf("first round %d: %d %v", i, status, m)
		}
	}
	for i := max; i < max+2; i++ {
		_, m := postModern(t, rig.cl.proxy.URL, "acme-viewer", i, `"name":"delete_thing","arguments":{"id":"x"}`, caps)
		if code, msg := modernRefusal(m); !tooManyConfirms(code, msg, max) {
			t.Fatalf("one first round more: %v", m)
		}
	}
	if n := nonces(); n != max {
		t.Fatalf("%d nonce records, want %d", n, max)
	}
	if _, m := postModern(t, rig.cl.proxy.URL, "acme-admin", 0, `"name":"delete_thing","arguments":{"id":"x"}`, caps); m["result"] == nil {
		t.Fatalf("another identity: %v", m)
	}
	if n := rig.f.count("delete_thing"); n != 0 {
		t.Fatalf("ran %d times", n)
	}
}

// TestConfirmsPerIdentityCounted: with Config.Limits.MaxConfirmsPerIdentity 3, a
// fourth confirm is refused with retryAfterMs; answering one (the tool
// runs) frees no place, since its record stays; once the first stop
// counting (twice ConfirmTimeout plus the linger after their creation),
// confirms are asked again. The zero identity (no Authenticate) is one
// identity.
func TestConfirmsPerIdentityCounted(t *testing.T) {
	for _, anonymous := range []bool{false, true} {
		t.Run(fmt.Sprint("anonymous=", anonymous), func(t *testing.T) {
			var ran atomic.Int64
			cfg := mcphandler.Config{
				Authenticate:   bearer,
				Limits:         mcphandler.Limits{MaxConfirmsPerIdentity: 3},
				ConfirmTimeout: 300 * time.Millisecond,
				Logger:         slog.New(slog.DiscardHandler),
				ListTools: func(context.Context) ([]mcphandler.Tool, error) {
					return []mcphandler.Tool{{Name: "delete_thing", Handler: func(context.Context, *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
						ran.Add(1)
						return mcphandler.TextResult("deleted"), nil
					}}}, nil
				},
				BeforeCall: func(context.Context, *mcphandler.ToolCall) (mcphandler.Decision, error) {
					return mcphandler.Confirm("Really delete?"), nil
				},
			}
			token := "acme-viewer"
			if anonymous {
				cfg.Authenticate, token = nil, ""
			}
			h := mcphandler.New(cfg)
			mcphandler.SetConfirmLinger(h, 100*time.Millisecond)
			srv := httptest.NewServer(h)
			t.Cleanup(func() { srv.Close(); h.Close() })
			call := func(i int, responses map[string]any, state string) map[string]any {
				params := fmt.Sprintf(`"name":"delete_thing","arguments":{"i":%d}`, i)
				if responses != nil {
					b, _ := json.Marshal(responses)
					params += `,"inputResponses":` + string(b) + `,"requestState":"` + state + `"`
				}
				_, _, b := modernPost(t, srv, token, modernBody(i, "tools/call", params, `{"elicitation":{}}`), nil)
				var m map[string]any
				json.Unmarshal(b, &m)
				return m
			}
			start := time.Now()
			var states []string
			for i := range 3 {
				keys, state := inputRound(call(i, nil, ""))
				if len(keys) != 1 {
					t.Fatalf("first round %d", i)
				}
				states = append(states, state)
			}
			refused := func() time.Duration {
				m := call(3, nil, "")
				code, msg := modernRefusal(m)
				if !tooManyConfirms(code, msg, 3) {
					t.Fatalf("a fourth confirm: %v", m)
				}
				var data struct{ RetryAfterMs int64 }
				b, _ := json.Marshal(m["error"].(map[string]any)["data"])
				if json.Unmarshal(b, &data) != nil || data.RetryAfterMs <= 0 || data.RetryAfterMs > 700 {
					t.Fatalf("retryAfterMs of %s", b)
				}
				return time.Duration(data.RetryAfterMs) * time.Millisecond
			}
			refused()
			if m := call(0, map[string]any{"mcphandler/confirm": acceptConfirm}, states[0]); ran.Load() != 1 {
				t.Fatalf("the answered confirm: %v", m)
			}
			wait := refused()
			if time.Since(start) > 600*time.Millisecond {
				t.Skip("too slow to see the count before it ends")
			}
			time.Sleep(wait)
			if keys, _ := inputRound(call(4, nil, "")); len(keys) != 1 {
				t.Fatal("no confirm asked once the first stopped counting")
			}
		})
	}
}

// holdHost serves one tool, "hold", which counts its runs in progress and
// waits until released (or its context ends), and one, "report", which
// reports progress once and answers.
type holdHost struct {
	started, running atomic.Int64
	release          chan struct{}
}

func newHoldHost(t *testing.T) *holdHost {
	b := &holdHost{release: make(chan struct{})}
	t.Cleanup(b.free)
	return b
}

func (b *holdHost) free() {
	select {
	case <-b.release:
	default:
		close(b.release)
	}
}

func (b *holdHost) config(store session.Store) mcphandler.Config {
	return mcphandler.Config{
		Authenticate: bearer,
		Store:        store,
		StateKeys:    testStateKeys,
		Logger:       slog.New(slog.DiscardHandler),
		ListTools: func(context.Context) ([]mcphandler.Tool, error) {
			return []mcphandler.Tool{
				{Name: "hold", Handler: func(ctx context.Context, _ *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
					b.started.Add(1)
					b.running.Add(1)
					defer b.running.Add(-1)
					select {
					case <-b.release:
					case <-ctx.Done():
					}
					return mcphandler.TextResult("held"), nil
				}},
				{Name: "report", Handler: func(_ context.Context, call *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
					call.Exchange.Progress(1, 2, "half")
					return mcphandler.TextResult("reported"), nil
				}},
			}, nil
		},
	}
}

// hangUp posts tools/call hold through c and hangs up once the tool runs;
// it returns the JSON-RPC error of an answer that came first instead.
func (b *holdHost) hangUp(t *testing.T, c *mcptest.Client, id int) *mcptest.Message {
	t.Helper()
	before := b.started.Load()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	answer := make(chan *mcptest.Message, 1)
	go func() {
		defer close(answer)
		resp, err := c.Post(ctx, fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"hold"}}`, id), nil)
		if err != nil {
			return
		}
		defer resp.Body.Close()
		var m mcptest.Message
		if json.NewDecoder(resp.Body).Decode(&m) == nil {
			answer <- &m
		}
	}()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if b.started.Load() > before {
			return nil // it runs: hang up
		}
		select {
		case m := <-answer:
			if m == nil {
				t.Fatalf("call %d: no answer", id)
			}
			return m
		default:
		}
	}
	t.Fatalf("call %d neither ran nor was answered", id)
	return nil
}

// defaultMaxRunning is the default of Config.Limits.MaxRunningPerSession.
const defaultMaxRunning = 32

// tooManyRunning reports whether e is the refusal of a request past the
// bound of its session.
func tooManyRunning(code mcphandler.Code, msg string) bool {
	return code == mcphandler.CodeRateLimited && strings.Contains(msg, fmt.Sprintf("%d requests of this session are running", defaultMaxRunning))
}

// TestAttackRunningPerSession: a client hangs up on tools/call after
// call, in one session. A session's requests go on when their client
// leaves (a hang-up is not a cancellation), so each kept a goroutine, its
// request and whatever its tool holds, with no connection left to bound
// them: on main 150 hang-ups left 150 tools running. Now a session runs
// at most Config.Limits.MaxRunningPerSession requests at once on a replica:
// past it a request is refused with -32000 saying so, before its tool
// runs; another session is not affected; once they end, the session runs
// requests again. The 2024-11-05 transport, whose requests go on after
// their 202, is bounded the same way.
func TestAttackRunningPerSession(t *testing.T) {
	t.Run("2025-11-25 hang-ups", func(t *testing.T) {
		b := newHoldHost(t)
		h := mcphandler.New(b.config(nil))
		srv := httptest.NewServer(h)
		t.Cleanup(func() { b.free(); srv.Close(); h.Close() })
		c := mcptest.Dial(srv.URL, mcptest.WithToken("acme-viewer"))
		t.Cleanup(c.Close)
		if _, err := c.Initialize(context.Background()); err != nil {
			t.Fatal(err)
		}
		refused := 0
		for i := range 150 {
			if m := b.hangUp(t, c, i); m != nil {
				if m.Error == nil || !tooManyRunning(m.Error.Code, m.Error.Message) {
					t.Fatalf("call %d answered %+v", i, m)
				}
				refused++
			}
		}
		if n := b.running.Load(); n != defaultMaxRunning || refused != 150-defaultMaxRunning {
			t.Fatalf("%d tools running after 150 hang-ups, %d refused; want %d, %d", n, refused, defaultMaxRunning, 150-defaultMaxRunning)
		}
		other := connect(t, h, "acme-viewer")
		go other.CallTool(context.Background(), "hold", nil)
		for deadline := time.Now().Add(5 * time.Second); b.running.Load() == defaultMaxRunning; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("another session of the identity cannot run its call")
			}
		}
		b.free()
		for deadline := time.Now().Add(5 * time.Second); b.running.Load() > 0; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%d still running once released", b.running.Load())
			}
		}
		if res, err := c.CallTool(context.Background(), "hold", nil); err != nil || res.Text() != "held" {
			t.Fatalf("after they ended: %+v %v", res, err)
		}
	})
	t.Run("2024-11-05", func(t *testing.T) {
		b := newHoldHost(t)
		h := mcphandler.New(b.config(nil))
		srv := httptest.NewServer(legacyMux(h))
		t.Cleanup(func() { b.free(); srv.Close(); h.Close() })
		c := mcptest.Dial(srv.URL+"/sse", mcptest.WithEra(mcptest.SSE), mcptest.WithToken("acme-viewer"))
		t.Cleanup(c.Close)
		if _, err := c.Initialize(context.Background()); err != nil {
			t.Fatal(err)
		}
		const calls = 60
		errs := make(chan error, calls)
		for range calls {
			go func() {
				_, err := c.CallTool(context.Background(), "hold", nil)
				errs <- err
			}()
		}
		for i := range calls - defaultMaxRunning {
			var err error
			select {
			case err = <-errs:
			case <-time.After(5 * time.Second):
				t.Fatalf("%d refused, %d running", i, b.running.Load())
			}
			var re *mcptest.RPCError
			if !errors.As(err, &re) || !tooManyRunning(re.Code, re.Message) {
				t.Fatalf("refusal %d: %v (%d running)", i, err, b.running.Load())
			}
		}
		if n := b.running.Load(); n != defaultMaxRunning {
			t.Fatalf("%d running, want %d", n, defaultMaxRunning)
		}
		b.free()
		for range defaultMaxRunning {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
	})
}

// logCounter is a store that remembers the event logs appended to.
type logCounter struct {
	session.Store
	mu   sync.Mutex
	logs map[string]bool
}

func (s *logCounter) AppendEvent(ctx context.Context, stream string, data []byte, ttl time.Duration) (uint64, error) {
	s.mu.Lock()
	if s.logs == nil {
		s.logs = map[string]bool{}
	}
	s.logs[stream] = true
	s.mu.Unlock()
	return s.Store.AppendEvent(ctx, stream, data, ttl)
}

func (s *logCounter) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.logs)
}

// defaultMaxResumable is the default of Config.Limits.MaxResumableStreamsPerSession.
const defaultMaxResumable = 64

// streamedCall posts tools/call report with a progress token through c
// and reads its SSE stream to the end: the ids of its events (the
// priming event's included) and its response.
func streamedCall(t *testing.T, c *mcptest.Client, id int) ([]string, *mcptest.Message) {
	t.Helper()
	body := fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"report","_meta":{"progressToken":%d}}}`, id, id)
	resp, err := c.Post(context.Background(), body, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	rd := mcptest.NewSSEReader(resp.Body)
	var ids []string
	sawProgress := false
	for {
		ev, err := rd.Next()
		if err != nil {
			t.Fatalf("call %d: %v", id, err)
		}
		if ev.HasID {
			ids = append(ids, ev.ID)
		}
		if m := ev.Message; m != nil && m.Method == "notifications/progress" {
			sawProgress = true
		}
		if m := ev.Message; m != nil && m.IsResponse() {
			if !sawProgress {
				t.Fatalf("call %d: no progress before its response", id)
			}
			return ids, m
		}
	}
}

// TestAttackEventLogsPerSession: one session calls a tool that reports
// progress, call after call: each call's POST stream turns to SSE, and
// its events were kept in the store for ResumeWindow for a resume, on
// main one log per call without end (150 calls, 150 logs). Now a session
// keeps at most Config.Limits.MaxResumableStreamsPerSession logs across
// replicas, each counting for ResumeWindow from its first event: a call
// past it is served whole, live, without a log (no priming event, no
// event ids: nothing to resume from), and a stream within the bound is
// still resumed on the other replica.
func TestAttackEventLogsPerSession(t *testing.T) {
	eachStore(t, func(t *testing.T, stores func(int) session.Store) {
		b := newHoldHost(t)
		var reps []*logCounter
		var srvs []*httptest.Server
		for i := range 2 {
			st := &logCounter{Store: stores(i)}
			h := mcphandler.New(b.config(st))
			srv := httptest.NewServer(h)
			t.Cleanup(func() { srv.Close(); h.Close() })
			reps, srvs = append(reps, st), append(srvs, srv)
		}
		cs := oneSession(t, []string{srvs[0].URL, srvs[1].URL}, mcptest.WithToken("acme-viewer"))
		var firstIDs, pastIDs []string
		for i := range 150 {
			ids, m := streamedCall(t, cs[i%2], i)
			if m.Error != nil || !strings.Contains(string(m.Result), "reported") {
				t.Fatalf("call %d: %+v", i, m)
			}
			if i == 0 {
				firstIDs = ids
			} else if i >= defaultMaxResumable {
				pastIDs = append(pastIDs, ids...)
			}
		}
		if n := reps[0].count() + reps[1].count(); n != defaultMaxResumable {
			t.Fatalf("150 calls: %d event logs kept for one session, want %d", n, defaultMaxResumable)
		}
		if len(pastIDs) != 0 {
			t.Fatalf("the streams past the bound have event ids %v", pastIDs)
		}
		if len(firstIDs) < 2 {
			t.Fatalf("the first call's stream has ids %v", firstIDs)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s, err := cs[1].Resume(ctx, firstIDs[0])
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		for {
			ev, err := s.Next(ctx)
			if err != nil {
				t.Fatalf("resuming the first stream: %v", err)
			}
			if m := ev.Message; m != nil && m.IsResponse() {
				break
			}
		}
		other := mcptest.Dial(srvs[0].URL, mcptest.WithToken("acme-viewer"))
		t.Cleanup(other.Close)
		if _, err := other.Initialize(context.Background()); err != nil {
			t.Fatal(err)
		}
		if ids, _ := streamedCall(t, other, 1); len(ids) == 0 {
			t.Fatal("another session's stream has no log")
		}
	})
}

// TestAttackConfirmRecordSize: a 2025 confirm's record holds what another
// replica needs to finish the call, the arguments among them, and the
// client's answer once it came. The attacker calls with 3 MiB of
// arguments (the message shown elides them) and answers with 3 MiB: on
// main the record held both, some 6 MiB per confirm, kept a minute past
// the timeout, a hundred per identity. Now a record keeps arguments up to
// 64 KiB (larger, the call is confirmed and run by its asker only, as on
// a stream that is not logged) and an answer up to 64 KiB (a larger one
// is a failed answer: not run), so it stays under 80 KiB; a call with
// small arguments still keeps them.
func TestAttackConfirmRecordSize(t *testing.T) {
	eachStore(t, func(t *testing.T, stores func(int) session.Store) {
		l := newLab(t, labOptions{replicas: 1, store: stores})
		st := l.reps[0].st
		largest := func() int {
			n := 0
			for _, k := range st.keys("confirm/") {
				if b, err := st.Load(context.Background(), k); err == nil {
					n = max(n, len(b))
				}
			}
			return n
		}
		var pending atomic.Int64
		huge := strings.Repeat("x", 3<<20)
		c := mcptest.Dial(l.reps[0].srv.URL, mcptest.WithToken("acme-viewer"),
			mcptest.WithElicitationHandler(func(context.Context, mcptest.ElicitParams) (mcptest.ElicitResult, error) {
				pending.Store(int64(largest()))
				return mcptest.ElicitResult{Action: "accept", Content: map[string]any{"confirm": true, "note": huge}}, nil
			}))
		t.Cleanup(c.Close)
		if _, err := c.Initialize(context.Background()); err != nil {
			t.Fatal(err)
		}
		res, err := c.CallTool(context.Background(), "delete_thing", map[string]any{"i": 1, "blob": huge})
		if err != nil || !res.IsError {
			t.Fatalf("the call: %+v %v", res, err)
		}
		if p, n := pending.Load(), largest(); p > 80<<10 || n > 80<<10 {
			t.Fatalf("a confirm record of %d bytes while pending, %d once answered", p, n)
		}
		if n := l.count(1); n != 0 {
			t.Fatalf("ran %d times on a 3 MiB answer", n)
		}
	})
}

// TestStreamsEndWithTheirConnection: what a long-lived stream holds on a
// replica (its registration for changes, its subscription, its
// goroutines) is bounded by no count but by its open connection, and by
// the caller's credentials (TestAttackExpiredTokenKeepsStream,
// TestAttackRevokedTokenKeepsStream). One identity opens 40 listen
// streams (2026-07-28) and the GET stream of each of 10 sessions, then
// hangs up: the replica holds none of them a moment later.
func TestStreamsEndWithTheirConnection(t *testing.T) {
	h := mcphandler.New(newHoldHost(t).config(nil))
	srv := httptest.NewServer(h)
	t.Cleanup(func() { srv.Close(); h.Close() })
	ctx, hangUp := context.WithCancel(context.Background())
	defer hangUp()
	m := mcptest.DialModern(srv.URL, mcptest.WithToken("acme-viewer"))
	t.Cleanup(m.Close)
	for range 40 {
		if _, err := m.Listen(ctx, map[string]any{"toolsListChanged": true}); err != nil {
			t.Fatal(err)
		}
	}
	for range 10 {
		c := mcptest.Dial(srv.URL, mcptest.WithToken("acme-viewer"))
		t.Cleanup(c.Close)
		if _, err := c.Initialize(context.Background()); err != nil {
			t.Fatal(err)
		}
		if _, err := c.OpenStream(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if n, _ := mcphandler.HeldStreams(h); n != 50 {
		t.Fatalf("%d streams held, want 50", n)
	}
	hangUp()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		n, running := mcphandler.HeldStreams(h)
		if n == 0 && running == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d streams and %d requests held after the client hung up", n, running)
		}
	}
}

// TestIndexRoundTrips: the indexes that bound what an identity keeps cost
// Redis round trips only where a record is made. A tools/call answered as
// JSON reads its session (2025) or nothing (2026-07-28), as before the
// bounds; a 2026-07-28 confirm's first round reads and writes the
// identity's index and writes its nonce record: three round trips.
func TestIndexRoundTrips(t *testing.T) {
	c := redistest.Client(t)
	hook := new(redistest.CountingHook)
	c.AddHook(hook)
	st := redisstore.New(c, redisstore.Options{Prefix: redistest.Prefix(t, c)})
	t.Cleanup(func() { st.Close() })
	b := newHoldHost(t)
	cfg := b.config(st)
	cfg.BeforeCall = func(_ context.Context, call *mcphandler.ToolCall) (mcphandler.Decision, error) {
		if call.Tool.Name == "hold" {
			return mcphandler.Confirm("Really hold?"), nil
		}
		return mcphandler.Allow(), nil
	}
	h := mcphandler.New(cfg)
	srv := httptest.NewServer(h)
	t.Cleanup(func() { srv.Close(); h.Close() })
	session := oneSession(t, []string{srv.URL}, mcptest.WithToken("acme-viewer"))[0]
	measure := func(name string, want map[string]int64, call func()) {
		t.Helper()
		call() // warm: connections, scripts
		hook.Reset()
		call()
		got := hook.Counts()
		var trips int64
		for _, n := range want {
			trips += n
		}
		if got.RoundTrips != trips || fmt.Sprint(got.ByName) != fmt.Sprint(want) {
			t.Errorf("%s: %d round trips, %v; want %v", name, got.RoundTrips, got.ByName, want)
		}
	}
	measure("2025 tools/call", map[string]int64{"getex": 1}, func() {
		if _, err := session.CallTool(context.Background(), "report", nil); err != nil {
			t.Fatal(err)
		}
	})
	measure("2026-07-28 tools/call", map[string]int64{}, func() {
		modernPost(t, srv, "acme-viewer", modernBody(1, "tools/call", `"name":"report"`, `{}`), nil)
	})
	i := 0
	measure("2026-07-28 confirm, first round", map[string]int64{"get": 1, "evalsha": 1, "set": 1}, func() {
		i++
		_, _, body := modernPost(t, srv, "acme-viewer", modernBody(i, "tools/call", `"name":"hold","arguments":{"i":`+itoa(i)+`}`, `{"elicitation":{}}`), nil)
		if !strings.Contains(string(body), "input_required") {
			t.Fatalf("not a question: %s", body)
		}
	})
}

// TestConfirmsPerIdentityRace: 150 first rounds of one identity's
// confirms at once, through two replicas sharing Redis: exactly the
// bound are asked and written, the rest refused; none is lost to the
// race (each admission is a CompareAndSwap of the identity's index).
func TestConfirmsPerIdentityRace(t *testing.T) {
	l := newLab(t, labOptions{replicas: 2, store: redisStores(t)})
	const calls = 150
	var asked, refused atomic.Int64
	var wg sync.WaitGroup
	for i := range calls {
		wg.Go(func() {
			_, _, b := modernPost(t, l.reps[i%2].srv, "acme-viewer",
				modernBody(i, "tools/call", fmt.Sprintf(`"name":"delete_thing","arguments":{"i":%d}`, i), `{"elicitation":{}}`), nil)
			var m map[string]any
			json.Unmarshal(b, &m)
			if keys, _ := inputRound(m); len(keys) == 1 {
				asked.Add(1)
			} else if code, msg := modernRefusal(m); tooManyConfirms(code, msg, defaultMaxConfirms) {
				refused.Add(1)
			} else {
				t.Errorf("call %d: %s", i, b)
			}
		})
	}
	wg.Wait()
	written := len(l.reps[0].st.keys("nonce/")) + len(l.reps[1].st.keys("nonce/"))
	if asked.Load() != defaultMaxConfirms || refused.Load() != calls-defaultMaxConfirms || written != defaultMaxConfirms {
		t.Fatalf("%d asked, %d refused, %d written; want %d, %d, %d", asked.Load(), refused.Load(), written,
			defaultMaxConfirms, calls-defaultMaxConfirms, defaultMaxConfirms)
	}
}

// TestBoundsWhenTheStoreFails: the index of a bound cannot be reached
// (its keys fail as a Redis that is down would). A confirm is then not
// asked (503, -32010, nothing written), as for any store failure; a
// streamed call is served whole, live, without a log.
func TestBoundsWhenTheStoreFails(t *testing.T) {
	t.Run("confirm", func(t *testing.T) {
		l := newLab(t, labOptions{replicas: 1, store: memoryStores()})
		prefix := "confirm-owner/"
		l.reps[0].st.failKeys.Store(&prefix)
		status, _, b := modernPost(t, l.reps[0].srv, "acme-viewer",
			modernBody(1, "tools/call", `"name":"delete_thing","arguments":{"i":1}`, `{"elicitation":{}}`), nil)
		if code, _ := rpcError(t, b); status != http.StatusServiceUnavailable || code != -32010 {
			t.Fatalf("%d %s", status, b)
		}
		if n := len(l.reps[0].st.keys("nonce/")); n != 0 {
			t.Fatalf("%d nonce records written", n)
		}
	})
	t.Run("event log", func(t *testing.T) {
		st := &faultStore{Store: session.NewMemory()}
		counted := &logCounter{Store: st}
		h := mcphandler.New(newHoldHost(t).config(counted))
		srv := httptest.NewServer(h)
		t.Cleanup(func() { srv.Close(); h.Close() })
		c := oneSession(t, []string{srv.URL}, mcptest.WithToken("acme-viewer"))[0]
		prefix := "event-logs/"
		st.failKeys.Store(&prefix)
		ids, m := streamedCall(t, c, 1)
		if m.Error != nil || len(ids) != 0 || counted.count() != 0 {
			t.Fatalf("ids %v, %d logs, %+v", ids, counted.count(), m)
		}
	})
}

// TestEventLogsCounted: with MaxResumableStreamsPerSession 2 and a short
// ResumeWindow, a third streamed call is not logged; once the first two
// stop counting (ResumeWindow after their first event), calls are logged
// again.
func TestEventLogsCounted(t *testing.T) {
	counted := &logCounter{Store: session.NewMemory()}
	cfg := newHoldHost(t).config(counted)
	cfg.Limits.MaxResumableStreamsPerSession, cfg.Sessions.ResumeWindow = 2, 300*time.Millisecond
	h := mcphandler.New(cfg)
	srv := httptest.NewServer(h)
	t.Cleanup(func() { srv.Close(); h.Close() })
	c := oneSession(t, []string{srv.URL}, mcptest.WithToken("acme-viewer"))[0]
	start := time.Now()
	for i := range 3 {
		if ids, _ := streamedCall(t, c, i); (len(ids) == 0) != (i == 2) {
			t.Fatalf("call %d: ids %v", i, ids)
		}
	}
	if time.Since(start) > 250*time.Millisecond {
		t.Skip("too slow to see the count before it ends")
	}
	time.Sleep(time.Until(start.Add(350 * time.Millisecond)))
	if ids, _ := streamedCall(t, c, 3); len(ids) == 0 {
		t.Fatal("not logged once the first stopped counting")
	}
}
