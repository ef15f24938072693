package redisstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mcphandler/mcphandler/session"
	"github.com/mcphandler/mcphandler/session/redisstore/redistest"
)

// foreignStores are the stores TestForeignTypes runs on: one server
// through the pool, through the autopipeliner and over RESP2, a server
// whose writes wait for its replica, and a cluster whose writes wait for
// theirs. Each store's breaker opens at the first failure it counts and
// stays open, so that a call it counted shows.
func foreignStores(t *testing.T) map[string]func(t *testing.T) (*Store, redis.UniversalClient) {
	strict := func(o Options) Options {
		o.BreakerThreshold, o.BreakerMinBackoff, o.BreakerMaxBackoff = 1, time.Hour, time.Hour
		return o
	}
	single := func(o Options, opt func(*redis.Options)) func(t *testing.T) (*Store, redis.UniversalClient) {
		return func(t *testing.T) (*Store, redis.UniversalClient) {
			ro := redistest.Options(t)
			if opt != nil {
				opt(ro)
			}
			c := redis.NewClient(ro)
			t.Cleanup(func() { c.Close() })
			o.Prefix = redistest.Prefix(t, c)
			return newStoreWith(t, c, strict(o)), c
		}
	}
	return map[string]func(t *testing.T) (*Store, redis.UniversalClient){
		"Pool":         single(Options{}, nil),
		"AutoPipeline": single(Options{AutoPipeline: true}, nil),
		"RESP2":        single(Options{}, func(o *redis.Options) { o.Protocol = 2 }),
		"WaitReplicas": func(t *testing.T) (*Store, redis.UniversalClient) {
			master, _, _ := redistest.Start(t)
			redistest.StartReplica(t, master)
			c := redistest.ClientAt(t, master)
			return newStoreWith(t, c, strict(Options{Prefix: redistest.Prefix(t, c), WaitReplicas: 1, WaitTimeout: time.Second})), c
		},
		"ClusterWaitReplicas": func(t *testing.T) (*Store, redis.UniversalClient) {
			c := redistest.SharedCluster(t).Client(t)
			return newStoreWith(t, c, strict(Options{Prefix: redistest.Prefix(t, c), WaitReplicas: 1, WaitTimeout: time.Second})), c
		},
	}
}

// TestForeignTypes: whatever Redis type something with write access to
// Redis gives a key of the store — a session record, a record of
// PutIfAbsent and CompareAndSwap, an event log, an owner's session list —
// every call on it gives the answer it gives for the empty value of the
// right type, which is the answer for undecodable bytes: never
// session.ErrUnavailable, never a panic, and the circuit breaker never
// counts it. Writes that append (AppendEvent, Admit) replace the foreign
// value, with an expiry.
func TestForeignTypes(t *testing.T) {
	for mode, open := range foreignStores(t) {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			st, c := open(t)
			for _, typ := range redistest.Types {
				t.Run(typ, func(t *testing.T) { testForeignType(t, st, c, typ) })
			}
		})
	}
}

func testForeignType(t *testing.T, st *Store, c redis.UniversalClient, typ string) {
	ctx := context.Background()
	n := 0
	// plant writes a value of typ at a new key of name and kind, and
	// returns the key.
	plant := func(name, kind string) string {
		t.Helper()
		n++
		k := st.key(fmt.Sprint(typ, "-", name, n), kind)
		redistest.Replace(t, c, k, typ)
		return k
	}
	name := func(k string) string { return k[strings.Index(k, "{")+1 : strings.Index(k, "}")] }
	// fine fails the test if err is the store's unavailability, or if
	// the breaker counted anything.
	fine := func(what string, err error) {
		t.Helper()
		if errors.Is(err, session.ErrUnavailable) {
			t.Fatalf("%s over a %s: %v, want the answer for undecodable bytes", what, typ, err)
		}
		if st.br.open.Load() || st.br.failures.Load() != 0 {
			t.Fatalf("%s over a %s: the breaker counted it (open %v, failures %d)", what, typ, st.br.open.Load(), st.br.failures.Load())
		}
	}
	typeOf := func(k string) string { return c.Type(ctx, k).Val() }
	expires := func(what, k string) {
		t.Helper()
		if d := c.PTTL(ctx, k).Val(); d <= 0 {
			t.Fatalf("%s over a %s: the key's PTTL is %v", what, typ, d)
		}
	}
	// isList: typ is the type of the store's lists, which the key then
	// holds with one undecodable element.
	isList := typ == "list"

	// Session records.
	k := plant("get", kindSession)
	_, err := st.Get(ctx, name(k))
	fine("Get", err)
	if !errors.Is(err, session.ErrNotFound) {
		t.Fatalf("Get over a %s: %v, want ErrNotFound", typ, err)
	}
	k = plant("update", kindSession)
	err = st.Update(ctx, sample(name(k)))
	fine("Update", err)
	if !errors.Is(err, session.ErrNotFound) || typeOf(k) != typ {
		t.Fatalf("Update over a %s: %v, key now a %s; want ErrNotFound and nothing written", typ, err, typeOf(k))
	}
	k = plant("create", kindSession)
	err = st.Create(ctx, sample(name(k)))
	fine("Create", err)
	if err == nil || errors.Is(err, session.ErrNotFound) || typeOf(k) != typ {
		t.Fatalf("Create over a %s: %v, key now a %s; want the id taken", typ, err, typeOf(k))
	}
	k = plant("delete", kindSession)
	err = st.Delete(ctx, name(k))
	fine("Delete", err)
	if err != nil || typeOf(k) != "none" {
		t.Fatalf("Delete of a %s: %v, key now a %s", typ, err, typeOf(k))
	}

	// Records: a foreign value reads as the empty value, which a
	// CompareAndSwap from what Load returned replaces.
	want := ""
	if typ == "string" {
		want = redistest.Garbage
	}
	k = plant("load", kindRecord)
	v, err := st.Load(ctx, name(k))
	fine("Load", err)
	if err != nil || v == nil || string(v) != want {
		t.Fatalf("Load of a %s: %q (nil %v), %v; want %q", typ, v, v == nil, err, want)
	}
	ok, err := st.PutIfAbsent(ctx, name(k), []byte("new"), time.Minute)
	fine("PutIfAbsent", err)
	if ok || typeOf(k) != typ {
		t.Fatalf("PutIfAbsent over a %s: %v, key now a %s; want false, nothing written", typ, ok, typeOf(k))
	}
	ok, err = st.CompareAndSwap(ctx, name(k), []byte("other"), []byte("new"), time.Minute)
	fine("CompareAndSwap", err)
	if ok || typeOf(k) != typ {
		t.Fatalf("CompareAndSwap from another value over a %s: %v, key now a %s", typ, ok, typeOf(k))
	}
	ok, err = st.CompareAndSwap(ctx, name(k), v, []byte("new"), time.Minute)
	fine("CompareAndSwap", err)
	if got, _ := st.Load(ctx, name(k)); !ok || string(got) != "new" {
		t.Fatalf("CompareAndSwap from what Load returned over a %s: %v, now %q", typ, ok, got)
	}
	expires("CompareAndSwap", k)

	// Event logs: a foreign value is an empty log, replaced by the next
	// append.
	k = plant("events", kindLog)
	evs, err := st.EventsAfter(ctx, name(k), 0)
	fine("EventsAfter", err)
	if isList && (err != nil || len(evs) != 1 || string(evs[0].Data) != redistest.Garbage) || !isList && (err != nil || len(evs) != 0) {
		t.Fatalf("EventsAfter of a %s: %v, %v", typ, evs, err)
	}
	seq, err := st.AppendEvent(ctx, name(k), []byte("e"), time.Minute)
	fine("AppendEvent", err)
	wantSeq := uint64(1)
	if isList {
		wantSeq = 2
	}
	evs, _ = st.EventsAfter(ctx, name(k), wantSeq-1)
	if err != nil || seq != wantSeq || len(evs) != 1 || string(evs[0].Data) != "e" || evs[0].Seq != wantSeq {
		t.Fatalf("AppendEvent over a %s: %d, %v; then %v", typ, seq, err, evs)
	}
	expires("AppendEvent", k)

	// An owner's session list: a foreign value is an empty list, so the
	// owner is admitted, and the limit holds from then on.
	owner := fmt.Sprint("owner-", typ)
	k = st.key("owner/"+owner, kindOwner)
	redistest.Replace(t, c, k, typ)
	var sessions []*session.Session
	for i := range 3 {
		s := sample(fmt.Sprint("admit-", typ, i))
		s.Owner = owner
		if err := st.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
		sessions = append(sessions, s)
		ended, err := st.Admit(ctx, s, 2)
		fine("Admit", err)
		wantEnded := []string(nil)
		if i == 2 {
			wantEnded = []string{sessions[0].ID}
		}
		if err != nil || !slices.Equal(ended, wantEnded) {
			t.Fatalf("Admit %d over a %s: ended %q, %v; want %q", i, typ, ended, err, wantEnded)
		}
	}
	if ids := c.LRange(ctx, k, 0, -1).Val(); !slices.Equal(ids, []string{sessions[1].ID, sessions[2].ID}) {
		t.Fatalf("the owner's list after Admits over a %s: %q", typ, ids)
	}
	expires("Admit", k)
}

// TestScriptReplyOfAnotherShape: a script answers with something else
// than the integer the store's scripts answer with — a string, an array,
// nil, an error reply. runScript reads it as -1, the answer for a value a
// script cannot parse, or returns Redis's error; what it returns, fed to
// the breaker as every call does, is not counted: Redis answered.
func TestScriptReplyOfAnotherShape(t *testing.T) {
	ctx := context.Background()
	for mode, open := range foreignStores(t) {
		if mode != "Pool" && mode != "WaitReplicas" {
			continue
		}
		t.Run(mode, func(t *testing.T) {
			st, _ := open(t)
			for _, tc := range []struct{ src, want string }{
				{"return 'x'", "-1"},
				{"return {1, 2}", "-1"},
				{"return nil", "-1"},
				{"return false", "-1"},
				{"return 1.5", "1"}, // Lua numbers are integers to Redis
				{"return redis.error_reply('ERR nope')", "ERR nope"},
				{"return redis.call('LPUSH', KEYS[1], 'x') + redis.call('GET', KEYS[1])", "WRONGTYPE"},
			} {
				n, err := st.runScript(ctx, newScript(tc.src), st.key("shape", kindRecord))
				st.observe(ctx, err) // as every call does
				got := fmt.Sprint(n)
				if err != nil {
					got = err.Error()
				}
				if !strings.HasPrefix(got, tc.want) {
					t.Errorf("%s: %d, %v; want %s", tc.src, n, err, tc.want)
				}
				if st.br.open.Load() || st.br.failures.Load() != 0 {
					t.Fatalf("%s: the breaker counted it", tc.src)
				}
			}
		})
	}
}

// TestAdmitForeignList: an owner's list made longer than Admit ever makes
// it — here of another owner's live session, repeated — is not the
// store's: Admit replaces it instead of checking and ending what it
// names, so what one Admit does stays bounded by its max. Up to
// max+admitSlack entries the list is the store's, and each entry is
// checked as usual.
func TestAdmitForeignList(t *testing.T) {
	ctx := context.Background()
	c := redistest.Client(t)
	st := newStoreOn(t, c, redistest.Prefix(t, c))
	h := new(redistest.CountingHook)
	c.AddHook(h)
	const max = 2
	bob := sample("bob")
	bob.Owner = "bob"
	if err := st.Create(ctx, bob); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		entries int
		checked bool
	}{
		{max + admitSlack, true},
		{max + admitSlack + 1, false},
		{10 * admitSlack, false},
	} {
		owner := fmt.Sprint("alice", tc.entries)
		k := st.key("owner/"+owner, kindOwner)
		planted := make([]any, tc.entries)
		for i := range planted {
			planted[i] = "gone"
		}
		planted[len(planted)-1] = bob.ID
		if err := c.RPush(ctx, k, planted...).Err(); err != nil {
			t.Fatal(err)
		}
		s := sample("s" + owner)
		s.Owner = owner
		if err := st.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
		h.Reset()
		ended, err := st.Admit(ctx, s, max)
		if err != nil {
			t.Fatalf("%d entries: %v", tc.entries, err)
		}
		exists := h.Counts().ByName["exists"]
		ids := c.LRange(ctx, k, 0, -1).Val()
		if tc.checked {
			// Every entry checked, the gone ones dropped; bob's session
			// is named in alice's list, and Admit trusts the list.
			if exists != int64(tc.entries+1) || !slices.Equal(ended, nil) || !slices.Equal(ids, []string{bob.ID, s.ID}) {
				t.Fatalf("%d entries: %d checked, ended %q, list %q", tc.entries, exists, ended, ids)
			}
			continue
		}
		if exists != 0 || len(ended) != 0 || !slices.Equal(ids, []string{s.ID}) {
			t.Fatalf("%d entries: %d checked, ended %d, list %.100q", tc.entries, exists, len(ended), ids)
		}
		if _, err := st.Get(ctx, bob.ID); err != nil {
			t.Fatalf("%d entries: bob's session: %v", tc.entries, err)
		}
	}
}
