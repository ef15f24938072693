package mcphandler_test

// Attacks with write access to Redis that leave, at a key of the handler,
// a value of another Redis type than the store writes there: a list where
// a session record is, a string where an event log is, and so on. Each
// must get the answer undecodable bytes get — 404, an unknown confirm, no
// events — never 503, and must not disable the store for anyone else:
// the stores below open their circuit breaker at the first failure they
// count and keep it open, so that one counted reply fails every later
// request of the test.

import (
	"context"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/mcptest"
	"github.com/mcphandler/mcphandler/session"
	"github.com/mcphandler/mcphandler/session/redisstore"
	"github.com/mcphandler/mcphandler/session/redisstore/redistest"
)

// foreignRedis is the Redis of a test's replicas, whose keys the test
// replaces by values of other types.
type foreignRedis struct {
	t      *testing.T
	c      redis.UniversalClient
	prefix string
}

func newForeignRedis(t *testing.T) *foreignRedis {
	c := redistest.Client(t)
	return &foreignRedis{t: t, c: c, prefix: redistest.Prefix(t, c)}
}

// store returns a new replica's store: its own client, and a breaker that
// opens at the first failure it counts and stays open.
func (f *foreignRedis) store(int) session.Store {
	st := redisstore.New(redistest.Client(f.t), redisstore.Options{Prefix: f.prefix,
		BreakerThreshold: 1, BreakerMinBackoff: time.Hour, BreakerMaxBackoff: time.Hour})
	f.t.Cleanup(func() { st.Close() })
	return st
}

// Kinds of the store's keys, as the package documentation of redisstore
// lays them out.
const (
	kindSession = "s" // session records
	kindRecord  = "r" // PutIfAbsent and CompareAndSwap
	kindLog     = "l" // event logs
	kindOwner   = "o" // an owner's sessions
)

// key is the Redis key of the store's key name of kind.
func (f *foreignRedis) key(name, kind string) string {
	return f.prefix + "{" + name + "}:" + kind
}

// replace replaces what the store holds under name of kind, which must
// exist, by a value of typ.
func (f *foreignRedis) replace(name, kind, typ string) {
	f.t.Helper()
	if f.c.Exists(context.Background(), f.key(name, kind)).Val() != 1 {
		f.t.Fatalf("nothing to replace at %s", f.key(name, kind))
	}
	redistest.Replace(f.t, f.c, f.key(name, kind), typ)
}

// names returns the store's key names of kind that start with p.
func (f *foreignRedis) names(p, kind string) []string {
	var out []string
	for _, k := range redistest.Keys(f.t, f.c, f.prefix+"{"+p) {
		if name, ok := strings.CutSuffix(strings.TrimPrefix(k, f.prefix+"{"), "}:"+kind); ok {
			out = append(out, name)
		}
	}
	return out
}

// TestAttackForeignSessionKeys: a session record, an owner's session list,
// a session's GET-stream claim and a POST stream's event log, each
// replaced by every Redis type.
func TestAttackForeignSessionKeys(t *testing.T) {
	ctx := context.Background()
	fr := newForeignRedis(t)
	cfg := (&fixture{}).config()
	cfg.StateKeys = testStateKeys
	cfg.Store = fr.store(0)
	cfg.Limits.MaxSessionsPerIdentity = 2
	tools := cfg.ListTools
	cfg.ListTools = func(ctx context.Context) ([]mcphandler.Tool, error) {
		ts, err := tools(ctx)
		return append(ts, mcphandler.Tool{Name: "later", Annotations: &mcphandler.ToolAnnotations{ReadOnlyHint: true},
			Handler: func(ctx context.Context, call *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
				call.CloseStream()
				return mcphandler.TextResult("later"), nil
			}}), err
	}
	h := mcphandler.New(cfg)
	t.Cleanup(func() { h.Close() })

	for _, typ := range redistest.Types {
		t.Run(typ, func(t *testing.T) {
			// The session record: the session is unknown.
			c := connect(t, h, "acme-viewer")
			fr.replace(c.SessionID(), kindSession, typ)
			if _, err := c.ListTools(ctx); !isHTTP(err, 404) {
				t.Fatalf("tools/list on a session whose record is a %s: %v, want 404", typ, err)
			}
			if _, err := c.OpenStream(ctx); !isHTTP(err, 404) {
				t.Fatalf("GET on a session whose record is a %s: %v, want 404", typ, err)
			}

			// The owner's list: it names no session, the owner is
			// admitted, and the limit holds again from then on.
			owners := fr.names("owner/4:acme/alice", kindOwner)
			if len(owners) != 1 {
				t.Fatalf("owner lists %q", owners)
			}
			fr.replace(owners[0], kindOwner, typ)
			var cs []*mcptest.Client
			for range 3 {
				cs = append(cs, connect(t, h, "acme-viewer"))
			}
			if _, err := cs[0].ListTools(ctx); !isHTTP(err, 404) {
				t.Fatalf("the oldest of 3 sessions past a limit of 2, the owner's list having been a %s: %v, want 404", typ, err)
			}
			if _, err := cs[2].ListTools(ctx); err != nil {
				t.Fatal(err)
			}

			// The claim of the GET stream: taken, as by garbage bytes.
			c = cs[2]
			redistest.Replace(t, fr.c, fr.key("getstream/"+c.SessionID(), kindRecord), typ)
			if _, err := c.OpenStream(ctx); !isHTTP(err, 409) {
				t.Fatalf("GET on a session whose stream claim is a %s: %v, want 409", typ, err)
			}

			// A POST stream's event log: a resume finds no events.
			c = connect(t, h, "acme-admin", mcptest.WithAutoResume(false))
			resp, err := c.Post(ctx, []byte(`{"jsonrpc":"2.0","id":"l1","method":"tools/call","params":{"name":"later"}}`), nil)
			if err != nil {
				t.Fatal(err)
			}
			r := mcptest.NewSSEReader(resp.Body)
			for _, err := r.Next(); err == nil; _, err = r.Next() {
			}
			resp.Body.Close()
			last := r.LastEventID()
			stream, _, _ := strings.Cut(last, "-")
			log := "events/" + c.SessionID() + "/" + stream
			for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
				if evs, err := cfg.Store.EventsAfter(ctx, log, 1); err != nil || len(evs) > 0 {
					break // the result is logged
				}
				if time.Now().After(deadline) {
					t.Fatal("the result was never logged")
				}
			}
			fr.replace(log, kindLog, typ)
			s, err := c.Resume(ctx, last)
			if err != nil {
				t.Fatalf("resuming a stream whose log is a %s: %v", typ, err)
			}
			wait, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
			for {
				ev, err := s.Next(wait)
				if errors.Is(err, context.DeadlineExceeded) {
					break
				}
				if err != nil || ev.Message != nil {
					t.Fatalf("resuming a stream whose log is a %s: %+v, %v; want no message", typ, ev, err)
				}
			}
			cancel()
			s.Close()
		})
	}
}

// TestAttackForeignConfirmKeys: the record, the stream pointer and the
// lease of a pending 2025 confirm, replaced by every Redis type, read as
// absent, as garbage does (TestAttackConfirmGarbageRecords): nothing
// runs. A lease alone of another type is held by nobody the asker knows,
// like a garbage one (TestAttackConfirmGarbageLease): the asker still
// decides, and the tool runs once.
func TestAttackForeignConfirmKeys(t *testing.T) {
	fr := newForeignRedis(t)
	l := newLab(t, labOptions{replicas: 2, confirmTimeout: 800 * time.Millisecond, lease: 200 * time.Millisecond, poll: 50 * time.Millisecond, store: fr.store})
	cs := l.session("acme-admin")
	for n, typ := range redistest.Types {
		t.Run(typ, func(t *testing.T) {
			i := 2*n + 1
			pc := startCall(t, cs[0], i)
			stream, _, _ := strings.Cut(pc.lastID, "-")
			fr.replace("confirm/"+pc.confirmID(), kindRecord, typ)
			fr.replace("confirm-of/"+cs[0].SessionID()+"/"+stream, kindRecord, typ)
			fr.replace("lease/"+pc.confirmID(), kindRecord, typ)
			if err := cs[1].Respond(context.Background(), pc.id, accept); !isHTTP(err, 400) {
				t.Errorf("an answer to a confirm whose record is a %s: %v, want 400", typ, err)
			}
			told := verdictOf(pc.await(cs, alwaysAlive, 3*time.Second))
			l.idle(3 * time.Second)
			if n := l.count(i); n != 0 || told == toldRan {
				t.Fatalf("ran %d times (client told %v)", n, told)
			}
			checkConfirmInvariants(t, l, pc, i, told, typ)

			i++
			pc = startCall(t, cs[0], i)
			fr.replace("lease/"+pc.confirmID(), kindRecord, typ)
			if err := cs[1].Respond(context.Background(), pc.id, accept); err != nil {
				t.Fatalf("answer: %v", err)
			}
			told = verdictOf(pc.await(cs, alwaysAlive, 5*time.Second))
			l.idle(5 * time.Second)
			checkConfirmInvariants(t, l, pc, i, told, typ+" lease")
			if told != toldRan {
				t.Fatalf("lease a %s: client told %v", typ, told)
			}
		})
	}
}

// TestAttackForeignNonceRecords: the record of a 2026-07-28 confirm,
// replaced by every Redis type after its call ran: a retry of its state
// gets a clean answer and runs nothing, as for garbage
// (TestAttackModernGarbageNonceRecords).
func TestAttackForeignNonceRecords(t *testing.T) {
	fr := newForeignRedis(t)
	var runs int
	tool := mcphandler.Tool{Name: "delete_thing", Handler: func(context.Context, *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
		runs++
		return mcphandler.TextResult("deleted"), nil
	}}
	ml := newModernLab(t, fr.store(0), tool, func(context.Context, *mcphandler.ToolCall) (mcphandler.Decision, error) {
		return mcphandler.Confirm("Really delete?"), nil
	})
	answers := map[string]any{mcphandler.ReservedKeyPrefix + "confirm": acceptConfirm}
	for _, typ := range redistest.Types {
		t.Run(typ, func(t *testing.T) {
			_, m := ml.call(1, "delete_thing", `{}`, nil, "")
			_, state := inputRound(m)
			before := runs
			if _, m := ml.call(2, "delete_thing", `{}`, answers, state); resultText(m) != "deleted" || runs != before+1 {
				t.Fatalf("round 2: %v", m)
			}
			nonces := ml.st.keys("nonce/")
			fr.replace(nonces[len(nonces)-1], kindRecord, typ)
			status, m := ml.call(3, "delete_thing", `{}`, answers, state)
			if runs != before+1 {
				t.Fatalf("a retry over a nonce record that is a %s ran the tool again: %d %v", typ, status, m)
			}
			if status != 200 || m["result"] == nil && m["error"] == nil {
				t.Fatalf("a retry over a nonce record that is a %s: %d %v", typ, status, m)
			}
		})
	}
}

// TestAttackForeignTaskKeys: a task's record, its runner's lease and its
// owner's index, replaced by every Redis type. The task is unknown, as
// one of another owner (TestTasksForeignIDIsUnknown); a lease of another
// type is held, like a garbage one; and the owner still creates tasks,
// where an index it could not swap out would refuse every one for as long
// as the key lived.
func TestAttackForeignTaskKeys(t *testing.T) {
	fr := newForeignRedis(t)
	tf := &taskFixture{}
	cfg := tf.config()
	cfg.StateKeys = testStateKeys
	cfg.Store = fr.store(0)
	h := mcphandler.New(cfg)
	t.Cleanup(func() { h.Close() })
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	unknown := "00000000-0000-4000-8000-000000000000"
	for _, typ := range redistest.Types {
		t.Run(typ, func(t *testing.T) {
			id := createTask(t, srv, "acme-viewer", "quick")
			awaitStatus(t, srv, "acme-viewer", id, "completed", 5*time.Second)
			fr.replace("task/"+id, kindRecord, typ)
			s1, got, _ := taskCall(t, srv, "acme-viewer", "tasks/get", `"taskId":"`+id+`"`, capsTasks, nil)
			s2, none, _ := taskCall(t, srv, "acme-viewer", "tasks/get", `"taskId":"`+unknown+`"`, capsTasks, nil)
			if s1 != s2 || string(got) != string(none) {
				t.Fatalf("tasks/get of a task whose record is a %s: %d %s; of an unknown one: %d %s", typ, s1, got, s2, none)
			}

			owners := fr.names("task-owner/", kindRecord)
			if len(owners) != 1 {
				t.Fatalf("task owner indexes %q", owners)
			}
			fr.replace(owners[0], kindRecord, typ)
			id = createTask(t, srv, "acme-viewer", "wait")
			<-tf.started
			if res := getTask(t, srv, "acme-viewer", id); res["status"] != "working" {
				t.Fatalf("a task created over an index that was a %s: %v", typ, res)
			}

			fr.replace("task-lease/"+id, kindRecord, typ)
			if res := getTask(t, srv, "acme-viewer", id); res["status"] != "working" {
				t.Fatalf("a task whose lease is a %s: %v, want it working", typ, res)
			}
			if status, b, _ := taskCall(t, srv, "acme-viewer", "tasks/cancel", `"taskId":"`+id+`"`, capsTasks, nil); status != 200 {
				t.Fatalf("tasks/cancel: %d %s", status, b)
			}
			<-tf.stopped
		})
	}
}
