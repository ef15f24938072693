package mcphandler_test

import (
	"context"
	"encoding/json"
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

// testStateKeys are the StateKeys every replica of a test shares.
var testStateKeys = [][]byte{[]byte("0123456789abcdef0123456789abcdef")}

// faultStore is one replica's view of a shared store, with faults a test
// can switch on: the replica's death (every call fails, as when its
// process is gone), added latency, a Publish that reports no receiver
// (Redis Cluster counts only the subscribers of the node that got the
// PUBLISH), lost answers, and a hook run before each CompareAndSwap.
type faultStore struct {
	session.Store
	dead      atomic.Bool
	delay     atomic.Int64 // nanoseconds added to every call
	zeroCount atomic.Bool
	dropReply atomic.Bool
	beforeCAS atomic.Pointer[func(key string, new []byte)]
	failKeys  atomic.Pointer[string] // records under this prefix cannot be reached

	mu        sync.Mutex // guards published and puts
	published []publishedMsg
	puts      []string // keys written by PutIfAbsent
}

type publishedMsg struct {
	channel string
	msg     []byte
}

var errDead = fmt.Errorf("%w: the replica is dead", session.ErrUnavailable)

// gateKey is gate for a record's key.
func (s *faultStore) gateKey(key string) error {
	if p := s.failKeys.Load(); p != nil && strings.HasPrefix(key, *p) {
		return errDead
	}
	return s.gate()
}

func (s *faultStore) gate() error {
	if d := time.Duration(s.delay.Load()); d > 0 {
		time.Sleep(d)
	}
	if s.dead.Load() {
		return errDead
	}
	return nil
}

func (s *faultStore) Create(ctx context.Context, sess *session.Session) error {
	if err := s.gate(); err != nil {
		return err
	}
	return s.Store.Create(ctx, sess)
}

func (s *faultStore) Get(ctx context.Context, id string) (*session.Session, error) {
	if err := s.gate(); err != nil {
		return nil, err
	}
	return s.Store.Get(ctx, id)
}

func (s *faultStore) Update(ctx context.Context, sess *session.Session) error {
	if err := s.gate(); err != nil {
		return err
	}
	return s.Store.Update(ctx, sess)
}

func (s *faultStore) Delete(ctx context.Context, id string) error {
	if err := s.gate(); err != nil {
		return err
	}
	return s.Store.Delete(ctx, id)
}

func (s *faultStore) Publish(ctx context.Context, channel string, msg []byte) (int, error) {
	if err := s.gate(); err != nil {
		return 0, err
	}
	s.mu.Lock()
	s.published = append(s.published, publishedMsg{channel, append([]byte(nil), msg...)})
	s.mu.Unlock()
	if s.dropReply.Load() && strings.HasPrefix(channel, "reply/") {
		return 1, nil // lost on the way, as Redis Pub/Sub may lose it
	}
	n, err := s.Store.Publish(ctx, channel, msg)
	if s.zeroCount.Load() {
		n = 0
	}
	return n, err
}

func (s *faultStore) Subscribe(ctx context.Context, channel string) (session.Subscription, error) {
	if err := s.gate(); err != nil {
		return nil, err
	}
	return s.Store.Subscribe(ctx, channel)
}

func (s *faultStore) PutIfAbsent(ctx context.Context, key string, value []byte, ttl time.Duration) (bool, error) {
	if err := s.gateKey(key); err != nil {
		return false, err
	}
	s.mu.Lock()
	s.puts = append(s.puts, key)
	s.mu.Unlock()
	return s.Store.PutIfAbsent(ctx, key, value, ttl)
}

func (s *faultStore) Load(ctx context.Context, key string) ([]byte, error) {
	if err := s.gateKey(key); err != nil {
		return nil, err
	}
	return s.Store.Load(ctx, key)
}

func (s *faultStore) CompareAndSwap(ctx context.Context, key string, old, new []byte, ttl time.Duration) (bool, error) {
	if err := s.gateKey(key); err != nil {
		return false, err
	}
	if hook := s.beforeCAS.Load(); hook != nil {
		(*hook)(key, new)
	}
	return s.Store.CompareAndSwap(ctx, key, old, new, ttl)
}

func (s *faultStore) AppendEvent(ctx context.Context, stream string, data []byte, ttl time.Duration) (uint64, error) {
	if err := s.gate(); err != nil {
		return 0, err
	}
	return s.Store.AppendEvent(ctx, stream, data, ttl)
}

func (s *faultStore) EventsAfter(ctx context.Context, stream string, after uint64) ([]session.Event, error) {
	if err := s.gate(); err != nil {
		return nil, err
	}
	return s.Store.EventsAfter(ctx, stream, after)
}

// messages returns what was published on channels starting with prefix.
func (s *faultStore) messages(prefix string) []publishedMsg {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []publishedMsg
	for _, p := range s.published {
		if strings.HasPrefix(p.channel, prefix) {
			out = append(out, p)
		}
	}
	return out
}

// keys returns the keys written by PutIfAbsent that start with prefix.
func (s *faultStore) keys(prefix string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, k := range s.puts {
		if strings.HasPrefix(k, prefix) {
			out = append(out, k)
		}
	}
	return out
}

// overwrite replaces whatever key holds by value, as anything with write
// access to the store could. It reports false when key holds nothing.
func overwrite(st session.Store, key string, value []byte) bool {
	ctx := context.Background()
	for range 10 {
		old, err := st.Load(ctx, key)
		if err != nil {
			return false
		}
		if ok, _ := st.CompareAndSwap(ctx, key, old, value, time.Minute); ok {
			return true
		}
	}
	return false
}

// lab is a set of replicas sharing one store, each with its own view of it
// (a faultStore) behind its own test server. Its one tool, delete_thing,
// asks a confirm, counts its runs by the argument "i", and calls onRun
// with the index of the replica running it.
type lab struct {
	t     *testing.T
	reps  []*labReplica
	runs  sync.Map // i -> *atomic.Int64
	onRun atomic.Pointer[func(rep int)]

	mu     sync.Mutex // guards events
	events []mcphandler.CallEvent
}

type labReplica struct {
	idx      int
	h        *mcphandler.Handler
	srv      *httptest.Server
	st       *faultStore
	inFlight atomic.Int64
}

// labOptions shape a lab.
type labOptions struct {
	replicas       int
	confirmTimeout time.Duration
	lease, poll    time.Duration
	// store returns replica i's store; all of them must share their data.
	store func(i int) session.Store
	// tool, if set, replaces delete_thing's handler body (after counting).
	tool func(ctx context.Context, call *mcphandler.ToolCall) (*mcphandler.ToolResult, error)
	// beforeCall, if set, replaces the policy that confirms delete_thing.
	beforeCall mcphandler.BeforeCallFunc
}

func memoryStores() func(int) session.Store {
	m := session.NewMemory()
	return func(int) session.Store { return m }
}

func redisStores(t *testing.T) func(int) session.Store {
	first := redistest.Client(t)
	prefix := redistest.Prefix(t, first)
	return func(int) session.Store {
		st := redisstore.New(redistest.Client(t), redisstore.Options{Prefix: prefix})
		t.Cleanup(func() { st.Close() })
		return st
	}
}

func newLab(t *testing.T, o labOptions) *lab {
	t.Helper()
	l := &lab{t: t}
	for i := range max(o.replicas, 1) {
		r := &labReplica{idx: i, st: &faultStore{Store: o.store(i)}}
		cfg := mcphandler.Config{
			Name:           "lab",
			Authenticate:   bearer,
			Roles:          []string{"viewer", "editor", "admin"},
			ConfirmTimeout: o.confirmTimeout,
			StateKeys:      testStateKeys,
			Store:          r.st,
			Logger:         slog.New(slog.DiscardHandler),
			ListTools: func(context.Context) ([]mcphandler.Tool, error) {
				return []mcphandler.Tool{{
					Name:        "delete_thing",
					Annotations: &mcphandler.ToolAnnotations{DestructiveHint: ptr(true)},
					Handler: func(ctx context.Context, call *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
						if o.tool != nil {
							return o.tool(ctx, call)
						}
						i := argI(call.Arguments)
						l.ran(i)
						if f := l.onRun.Load(); f != nil {
							(*f)(r.idx)
						}
						return mcphandler.TextResult(fmt.Sprintf("ran %d", i)), nil
					},
				}}, nil
			},
			BeforeCall: func(context.Context, *mcphandler.ToolCall) (mcphandler.Decision, error) {
				return mcphandler.Confirm("Really delete?"), nil
			},
			OnCall: func(ev mcphandler.CallEvent) {
				if r.st.dead.Load() {
					return // a dead replica reports nothing
				}
				l.mu.Lock()
				l.events = append(l.events, ev)
				l.mu.Unlock()
			},
		}
		if o.beforeCall != nil {
			cfg.BeforeCall = o.beforeCall
		}
		if o.confirmTimeout == 0 {
			cfg.ConfirmTimeout = 2 * time.Second
		}
		r.h = mcphandler.New(cfg)
		if o.lease > 0 {
			mcphandler.SetConfirmTimes(r.h, o.lease, o.poll)
		}
		r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			r.inFlight.Add(1)
			defer r.inFlight.Add(-1)
			defer func() {
				if v := recover(); v != nil {
					t.Errorf("replica %d panicked serving %s: %v", r.idx, req.Method, v)
				}
			}()
			r.h.ServeHTTP(w, req)
		}))
		t.Cleanup(func() { r.srv.Close(); r.h.Close() })
		l.reps = append(l.reps, r)
	}
	return l
}

func ptr[T any](v T) *T { return &v }

func argI(args json.RawMessage) int {
	var a struct{ I int }
	json.Unmarshal(args, &a)
	return a.I
}

func (l *lab) ran(i int) {
	v, _ := l.runs.LoadOrStore(i, new(atomic.Int64))
	v.(*atomic.Int64).Add(1)
}

func (l *lab) count(i int) int64 {
	v, _ := l.runs.LoadOrStore(i, new(atomic.Int64))
	return v.(*atomic.Int64).Load()
}

// kill takes replica i down as a crash would: it can no longer reach the
// store, its clients' connections drop, and it reports nothing.
func (l *lab) kill(i int) {
	l.reps[i].st.dead.Store(true)
	l.reps[i].srv.CloseClientConnections()
}

// idle waits until no replica serves a request (a dead replica's
// goroutines included), at most d.
func (l *lab) idle(d time.Duration) bool {
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		busy := false
		for _, r := range l.reps {
			busy = busy || r.inFlight.Load() > 0
		}
		if !busy {
			return true
		}
	}
	return false
}

// revive brings every replica back, once idle.
func (l *lab) revive() {
	for _, r := range l.reps {
		r.st.dead.Store(false)
	}
}

// eventsFor returns the reported events of confirm id.
func (l *lab) eventsFor(id string) []mcphandler.CallEvent {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []mcphandler.CallEvent
	for _, ev := range l.events {
		if ev.ConfirmID == id {
			out = append(out, ev)
		}
	}
	return out
}

// session opens a session on replica 0 and returns a client per replica
// in it.
func (l *lab) session(token string) []*mcptest.Client {
	l.t.Helper()
	first := mcptest.Dial(l.reps[0].srv.URL, mcptest.WithToken(token), mcptest.WithAutoResume(false),
		mcptest.WithElicitationHandler(func(context.Context, mcptest.ElicitParams) (mcptest.ElicitResult, error) {
			return mcptest.ElicitResult{Action: "cancel"}, nil
		}))
	l.t.Cleanup(first.Close)
	if _, err := first.Initialize(context.Background()); err != nil {
		l.t.Fatalf("initialize: %v", err)
	}
	cs := []*mcptest.Client{first}
	for _, r := range l.reps[1:] {
		c := mcptest.Dial(r.srv.URL, mcptest.WithToken(token), mcptest.WithAutoResume(false))
		c.SetSessionID(first.SessionID())
		c.SetProtocolVersion(first.ProtocolVersion())
		l.t.Cleanup(c.Close)
		cs = append(cs, c)
	}
	return cs
}

// confirmCall is a tools/call of delete_thing in flight, read as SSE.
type pendingCall struct {
	resp    *http.Response
	rd      *mcptest.SSEReader
	cancel  context.CancelFunc
	id      json.RawMessage // the confirm's elicitation id
	lastID  string
	callID  int
	mu      sync.Mutex
	final   *mcptest.Message
	readErr error
	done    chan struct{}
}

// startCall posts tools/call delete_thing {"i": i} through c and reads
// its stream up to the confirm's question.
func startCall(t *testing.T, c *mcptest.Client, i int) *pendingCall {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"delete_thing","arguments":{"i":%d}}}`, 1000+i, i)
	resp, err := c.Post(ctx, []byte(body), nil)
	if err != nil {
		cancel()
		t.Fatalf("tools/call: %v", err)
	}
	pc := &pendingCall{resp: resp, rd: mcptest.NewSSEReader(resp.Body), cancel: cancel, callID: 1000 + i, done: make(chan struct{})}
	for {
		ev, err := pc.rd.Next()
		if err != nil {
			cancel()
			resp.Body.Close()
			t.Fatalf("reading the call's stream: %v (status %d)", err, resp.StatusCode)
		}
		if ev.HasID {
			pc.lastID = ev.ID
		}
		if m := ev.Message; m != nil && m.Method == "elicitation/create" {
			pc.id = m.ID
			break
		}
	}
	go pc.readRest()
	return pc
}

// readRest reads the rest of the POST stream until its response.
func (pc *pendingCall) readRest() {
	defer close(pc.done)
	defer pc.resp.Body.Close()
	for {
		ev, err := pc.rd.Next()
		if err != nil {
			pc.mu.Lock()
			pc.readErr = err
			pc.mu.Unlock()
			return
		}
		pc.mu.Lock()
		if ev.HasID {
			pc.lastID = ev.ID
		}
		if m := ev.Message; m != nil && m.IsResponse() {
			pc.final = m
			pc.mu.Unlock()
			return
		}
		pc.mu.Unlock()
	}
}

// disconnect drops the call's connection, as a client that goes away.
func (pc *pendingCall) disconnect() { pc.cancel() }

// confirmID is the confirm's id without quotes.
func (pc *pendingCall) confirmID() string { return strings.Trim(string(pc.id), `"`) }

// await returns the call's response: from its POST stream, or else by
// resuming the stream (Last-Event-ID) through the given clients in turn
// until wait has passed. nil means the client never got one.
func (pc *pendingCall) await(clients []*mcptest.Client, alive func(i int) bool, wait time.Duration) *mcptest.Message {
	deadline := time.Now().Add(wait)
	select {
	case <-pc.done:
	case <-time.After(wait):
		pc.cancel()
		<-pc.done
	}
	pc.mu.Lock()
	final, last := pc.final, pc.lastID
	pc.mu.Unlock()
	for n := 0; final == nil && last != "" && time.Now().Before(deadline); n++ {
		i := n % len(clients)
		if !alive(i) {
			time.Sleep(5 * time.Millisecond)
			continue
		}
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		s, err := clients[i].Resume(ctx, last)
		if err != nil {
			cancel()
			time.Sleep(10 * time.Millisecond)
			continue
		}
		for {
			ev, err := s.Next(ctx)
			if err != nil {
				break
			}
			if ev.HasID {
				last = ev.ID
			}
			if m := ev.Message; m != nil && m.IsResponse() {
				final = m
				break
			}
		}
		s.Close()
		cancel()
	}
	return final
}

// verdict is what a client was told about a call: it ran (the tool's own
// result), it did not run ("Not run…"), unknown, or nothing.
type verdict int

const (
	toldNothing verdict = iota
	toldRan
	toldNotRun
	toldUnknown
	toldError // a JSON-RPC error (e.g. the unknown-tool answer of a revoked call)
)

func (v verdict) String() string {
	return [...]string{"nothing", "ran", "not run", "unknown", "error"}[v]
}

func verdictOf(m *mcptest.Message) verdict {
	if m == nil {
		return toldNothing
	}
	if m.Error != nil {
		return toldError
	}
	var r mcptest.ToolResult
	if json.Unmarshal(m.Result, &r) != nil {
		return toldError
	}
	text := r.Text()
	switch {
	case !r.IsError && strings.HasPrefix(text, "ran "):
		return toldRan
	case strings.Contains(text, "is unknown"):
		return toldUnknown
	case strings.HasPrefix(text, "Not run"):
		return toldNotRun
	}
	return toldError
}

// checkConfirmInvariants checks what the confirm machinery promises about
// one call whatever happened: the tool ran at most once; a client told it
// did not run never sees it run, and one told it ran saw it run; a run has
// exactly one reported outcome, and no confirm has two contradicting ones.
func checkConfirmInvariants(t *testing.T, l *lab, pc *pendingCall, i int, told verdict, note string) {
	t.Helper()
	runs := l.count(i)
	var terminal []mcphandler.Outcome
	for _, ev := range l.eventsFor(pc.confirmID()) {
		if ev.Outcome != mcphandler.OutcomeReplayRefused {
			terminal = append(terminal, ev.Outcome)
		}
	}
	fail := func(format string, args ...any) {
		t.Helper()
		t.Errorf("%s: "+format+" (runs %d, told %v, outcomes %v)", append(append([]any{note}, args...), runs, told, terminal)...)
	}
	if runs > 1 {
		fail("the tool ran more than once")
	}
	if told == toldNotRun && runs != 0 {
		fail("the client was told it did not run, and it ran")
	}
	if told == toldRan && runs != 1 {
		fail("the client was told it ran, and it did not")
	}
	if len(terminal) > 1 {
		fail("more than one outcome reported for one confirm")
	}
	for _, o := range terminal {
		if o == mcphandler.OutcomeConfirmed && runs != 1 {
			fail("reported confirmed, but it did not run")
		}
		if runs == 1 && o != mcphandler.OutcomeConfirmed && o != mcphandler.OutcomeUnknown {
			fail("it ran, but the outcome reported is %s", o)
		}
	}
}
