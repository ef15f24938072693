package mcphandler_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/mcptest"
	"github.com/mcphandler/mcphandler/session/redisstore/redistest"
)

func TestReplicasServeOneConversation(t *testing.T) {
	f := &fixture{}
	cl := newCluster(t, 3, f.config(), redisClient(t))
	ctx := context.Background()
	c := mcptest.Dial(cl.proxy.URL, mcptest.WithToken("acme-admin"),
		mcptest.WithElicitationHandler(answer("accept", map[string]any{"confirm": true})))
	defer c.Close()
	if _, err := c.Initialize(ctx); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if names := toolNames(t, c); len(names) != 4 {
			t.Fatalf("tools %v", names)
		}
		if err := c.Ping(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.SetLogLevel(ctx, "debug"); err != nil {
		t.Fatal(err)
	}
	// The confirm is asked by one replica and answered through another.
	res, err := c.CallTool(ctx, "delete_thing", nil)
	if err != nil || res.IsError || f.count("delete_thing") != 1 {
		t.Fatalf("confirm across replicas: %+v, %v (ran %d)", res, err, f.count("delete_thing"))
	}
	for i := range cl.served {
		if cl.served[i].Load() == 0 {
			t.Fatalf("replica %d served nothing: the test did not alternate", i)
		}
	}
	// DELETE on one replica ends the session on all.
	if err := c.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := c.Ping(ctx); !isHTTP(err, 404) {
			t.Fatalf("after DELETE: %v, want 404 on every replica", err)
		}
	}
}

// The same answer delivered to two replicas runs the tool once.
func TestReplicasOneAnswerOneRun(t *testing.T) {
	f := &fixture{}
	cl := newCluster(t, 2, f.config(), redisClient(t))
	ctx := context.Background()
	var c *mcptest.Client
	c = mcptest.Dial(cl.proxy.URL, mcptest.WithToken("acme-admin"),
		mcptest.WithElicitationHandler(func(ctx context.Context, _ mcptest.ElicitParams) (mcptest.ElicitResult, error) {
			id := confirmID(t, c)
			var wg sync.WaitGroup
			for range 4 { // both replicas get it twice
				wg.Go(func() { c.Respond(ctx, id, accept) })
			}
			wg.Wait()
			return mcptest.ElicitResult{Action: "accept", Content: map[string]any{"confirm": true}}, nil
		}))
	defer c.Close()
	if _, err := c.Initialize(ctx); err != nil {
		t.Fatal(err)
	}
	// The client's own answer comes last and is refused, which may end its
	// call before the tool ran: wait for the call's event.
	c.CallTool(ctx, "delete_thing", nil)
	waitOutcome(t, f, mcphandler.OutcomeConfirmed)
	if n := f.count("delete_thing"); n != 1 {
		t.Fatalf("ran %d times, want 1", n)
	}
}

// A stream closed on one replica is resumed on another with Last-Event-ID.
func TestReplicasResume(t *testing.T) {
	cfg := (&fixture{}).config()
	cfg.BeforeCall = nil
	cfg.ListTools = func(context.Context) ([]mcphandler.Tool, error) {
		return []mcphandler.Tool{{Name: "slow", Handler: func(ctx context.Context, call *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
			call.CloseStream()
			time.Sleep(50 * time.Millisecond)
			call.Log(mcphandler.LevelInfo, "t", "after the close")
			return mcphandler.TextResult("resumed fine"), nil
		}}}, nil
	}
	cl := newCluster(t, 2, cfg, redisClient(t))
	ctx := context.Background()
	c := mcptest.Dial(cl.proxy.URL, mcptest.WithToken("acme-viewer"))
	defer c.Close()
	if _, err := c.Initialize(ctx); err != nil {
		t.Fatal(err)
	}
	c.SetLogLevel(ctx, "info")
	// mcptest resumes by itself: the POST's stream ends after the priming
	// event, and the client GETs with Last-Event-ID, via the next replica.
	res, err := c.CallTool(ctx, "slow", nil)
	if err != nil || res.Text() != "resumed fine" {
		t.Fatalf("resumed call: %+v, %v", res, err)
	}
	var got bool
	for _, n := range c.Notifications() {
		got = got || strings.Contains(string(n.Params), "after the close")
	}
	if !got {
		t.Fatal("the log sent after the close was not replayed")
	}
}

func TestReplicasNotifyAcrossReplicas(t *testing.T) {
	cl := newCluster(t, 2, (&fixture{}).config(), redisClient(t))
	ctx := context.Background()
	listen := func(token string) *mcptest.Stream {
		c := mcptest.NewModern(t, cl.replicas[1].srv.Config.Handler, mcptest.WithToken(token))
		s, err := c.Listen(ctx, map[string]any{"toolsListChanged": true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		if ack := nextMessage(t, s, 5*time.Second); ack == nil {
			t.Fatal("no ack")
		}
		return s
	}
	acme, globex := listen("acme-viewer"), listen("globex-editor")
	// A 2025 session's GET stream on replica 1 too.
	c25 := connect(t, cl.replicas[1].h, "acme-admin")
	get, err := c25.OpenStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer get.Close()
	nextMessage(t, get, 200*time.Millisecond) // the priming event carries no message
	if err := cl.replicas[0].h.NotifyToolsChanged(ctx, mcphandler.TenantOf("acme")); err != nil {
		t.Fatal(err)
	}
	for name, s := range map[string]*mcptest.Stream{"listen": acme, "GET": get} {
		if m := nextMessage(t, s, 5*time.Second); m == nil || m.Method != "notifications/tools/list_changed" {
			t.Fatalf("acme's %s stream on replica 1 got %+v", name, m)
		}
	}
	if m := nextMessage(t, globex, 300*time.Millisecond); m != nil {
		t.Fatalf("globex got acme's change: %+v", m)
	}
}

// While Redis is down, requests that need it get 503 quickly; when it is
// back, service resumes without a restart and nothing ran twice.
func TestReplicasRedisOutage(t *testing.T) {
	addr, stop, restart := redistest.Start(t)
	f := &fixture{}
	cfg := f.config()
	cfg.BeforeCall = nil
	cl := newCluster(t, 2, cfg, func() redis.UniversalClient { return redistest.ClientAt(t, addr) })
	ctx := context.Background()
	c := mcptest.Dial(cl.proxy.URL, mcptest.WithToken("acme-viewer"))
	defer c.Close()
	if _, err := c.Initialize(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CallTool(ctx, "read", nil); err != nil {
		t.Fatal(err)
	}
	stop()
	start := time.Now()
	_, err := c.CallTool(ctx, "read", nil)
	var he *mcptest.HTTPError
	if !errors.As(err, &he) || he.Status != 503 || !strings.Contains(string(he.Body), "unavailable") {
		t.Fatalf("with Redis down: %v, want 503", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("failing took %v", d)
	}
	restart()
	var res *mcptest.ToolResult
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if res, err = c.CallTool(ctx, "read", nil); err == nil {
			break
		}
	}
	// The restarted Redis kept nothing (no persistence): the session is
	// gone, and the client is told so with 404 rather than a hang.
	if err != nil && !isHTTP(err, 404) {
		t.Fatalf("after restart: %v", err)
	}
	if err == nil && res.IsError {
		t.Fatalf("after restart: %+v", res)
	}
	if n := f.count("read"); n > 2 {
		t.Fatalf("read ran %d times for 2 successful calls", n)
	}
	c2 := mcptest.Dial(cl.proxy.URL, mcptest.WithToken("acme-viewer"))
	defer c2.Close()
	if _, err := c2.Initialize(ctx); err != nil {
		t.Fatalf("a new session after the restart: %v", err)
	}
	if _, err := c2.CallTool(ctx, "read", nil); err != nil {
		t.Fatal(err)
	}
}

// The replica that asked for a confirm dies while the human thinks. The
// client resumes its stream on another replica (Last-Event-ID) and its
// accept, posted there, completes the call: the tool runs once and the
// result reaches the client.
func TestReplicasConfirmSurvivesReplicaDeath(t *testing.T) {
	f := &fixture{}
	cl := newCluster(t, 3, f.config(), redisClient(t))
	ctx := context.Background()
	var killed atomic.Int64
	killed.Store(-1)
	c := mcptest.Dial(cl.proxy.URL, mcptest.WithToken("acme-admin"),
		mcptest.WithElicitationHandler(func(context.Context, mcptest.ElicitParams) (mcptest.ElicitResult, error) {
			i := cl.lastCall.Load()
			cl.replicas[i].kill()
			killed.Store(i)
			return mcptest.ElicitResult{Action: "accept", Content: map[string]any{"confirm": true}}, nil
		}))
	defer c.Close()
	if _, err := c.Initialize(ctx); err != nil {
		t.Fatal(err)
	}
	res, err := c.CallTool(ctx, "delete_thing", map[string]any{"id": "x"})
	if killed.Load() < 0 {
		t.Fatal("no replica was killed: the confirm was not asked")
	}
	if err != nil || res.IsError || res.Text() != "delete_thing ran for acme" {
		t.Fatalf("after the asking replica died: %+v, %v", res, err)
	}
	if n := f.count("delete_thing"); n != 1 {
		t.Fatalf("ran %d times, want 1", n)
	}
	// The replica that finished the call reports it (after the client got
	// the result, so wait for it).
	waitOutcome(t, f, mcphandler.OutcomeConfirmed)
}

// The replica running a confirmed call dies mid-run: the client, resumed on
// another replica, is told that the outcome is unknown, and nothing runs
// again.
func TestReplicasRunnerDeathIsReported(t *testing.T) {
	f := &fixture{}
	cfg := f.config()
	var cl *cluster
	cfg.ListTools = func(context.Context) ([]mcphandler.Tool, error) {
		return []mcphandler.Tool{{Name: "delete_thing", Handler: func(ctx context.Context, call *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
			v, _ := f.runs.LoadOrStore("delete_thing", new(atomic.Int64))
			v.(*atomic.Int64).Add(1)
			cl.replicas[cl.lastCall.Load()].kill() // the runner dies mid-run
			time.Sleep(100 * time.Millisecond)
			return mcphandler.TextResult("deleted"), nil
		}}}, nil
	}
	cl = newCluster(t, 2, cfg, redisClient(t))
	ctx := context.Background()
	c := mcptest.Dial(cl.proxy.URL, mcptest.WithToken("acme-admin"),
		mcptest.WithElicitationHandler(answer("accept", map[string]any{"confirm": true})))
	defer c.Close()
	if _, err := c.Initialize(ctx); err != nil {
		t.Fatal(err)
	}
	res, err := c.CallTool(ctx, "delete_thing", nil)
	if err != nil || !res.IsError || !strings.Contains(res.Text(), "outcome of delete_thing is unknown") {
		t.Fatalf("after the runner died: %+v, %v", res, err)
	}
	if n := f.count("delete_thing"); n != 1 {
		t.Fatalf("ran %d times, want 1", n)
	}
}

// notifications/cancelled received by one replica cancels the call running
// on another.
func TestReplicasCancelAcrossReplicas(t *testing.T) {
	cfg := (&fixture{}).config()
	started := make(chan struct{}, 1)
	stopped := make(chan error, 1)
	cfg.BeforeCall = nil
	cfg.ListTools = func(context.Context) ([]mcphandler.Tool, error) {
		return []mcphandler.Tool{{Name: "slow", Handler: func(ctx context.Context, call *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
			started <- struct{}{}
			select {
			case <-ctx.Done():
				stopped <- ctx.Err()
			case <-time.After(10 * time.Second):
				stopped <- nil
			}
			return mcphandler.TextResult("done"), nil
		}}}, nil
	}
	cl := newCluster(t, 2, cfg, redisClient(t))
	ctx := context.Background()
	c := mcptest.Dial(cl.proxy.URL, mcptest.WithToken("acme-viewer"))
	defer c.Close()
	if _, err := c.Initialize(ctx); err != nil {
		t.Fatal(err)
	}
	go func() {
		resp, err := c.Post(ctx, []byte(`{"jsonrpc":"2.0","id":"slow-1","method":"tools/call","params":{"name":"slow"}}`), nil)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}()
	<-started
	runner := cl.lastCall.Load()
	if err := c.Notify(ctx, "notifications/cancelled", map[string]any{"requestId": "slow-1"}); err != nil {
		t.Fatal(err)
	}
	if n := cl.next.Load() % int64(len(cl.replicas)); n == runner {
		t.Fatalf("the cancellation went to the replica running the call (%d): the test proves nothing", n)
	}
	if err := <-stopped; !errors.Is(err, context.Canceled) {
		t.Fatalf("the call on replica %d was not cancelled: %v", runner, err)
	}
}

// A session has one standalone GET stream across all replicas, so that no
// message is delivered twice.
func TestReplicasOneGETStream(t *testing.T) {
	cl := newCluster(t, 2, (&fixture{}).config(), redisClient(t))
	ctx := context.Background()
	a := connect(t, cl.replicas[0].h, "acme-viewer")
	b := mcptest.New(t, cl.replicas[1].h, mcptest.WithToken("acme-viewer"))
	b.SetSessionID(a.SessionID())
	b.SetProtocolVersion(a.ProtocolVersion())
	s, err := a.OpenStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.OpenStream(ctx); !isHTTP(err, http.StatusConflict) {
		t.Fatalf("a second GET on another replica: %v, want 409", err)
	}
	s.Close()
	var s2 *mcptest.Stream
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if s2, err = b.OpenStream(ctx); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("after the first stream closed: %v", err)
	}
	s2.Close()
}
