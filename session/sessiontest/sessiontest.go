// Package sessiontest checks that a [session.Store] implementation behaves
// as the handler relies on, in the style of testing/fstest: every store,
// the in-memory one and the Redis one alike, runs [Run] in its tests. A
// host that implements or wraps one part of a store on its own checks it
// with that part's suite: [RunSessions], [RunPubSub], [RunRecords] or
// [RunEventLog].
package sessiontest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/mcphandler/mcphandler/session"
)

// Run runs the conformance suite against stores made by newStore: the
// suites of its four parts, [RunSessions], [RunPubSub], [RunRecords] and
// [RunEventLog], each subtest at the top level of t. Each subtest gets a
// fresh store; stores that share a backend should use a distinct key
// prefix per call so subtests do not see each other's data.
func Run(t *testing.T, newStore func(t *testing.T) session.Store) {
	RunSessions(t, func(t *testing.T) session.Sessions { return newStore(t) })
	RunPubSub(t, func(t *testing.T) session.PubSub { return newStore(t) })
	RunRecords(t, func(t *testing.T) session.Records { return newStore(t) })
	RunEventLog(t, func(t *testing.T) session.EventLog { return newStore(t) })
}

// RunSessions checks a [session.Sessions]: create, get, update, delete,
// copies not shared, duplicate ids refused, idle expiry and its extension
// by use, concurrent use, and Admit. Each subtest gets a fresh store from
// newStore.
func RunSessions(t *testing.T, newStore func(t *testing.T) session.Sessions) {
	t.Run("CreateGet", func(t *testing.T) { testCreateGet(t, newStore(t)) })
	t.Run("GetReturnsCopy", func(t *testing.T) { testCopy(t, newStore(t)) })
	t.Run("Update", func(t *testing.T) { testUpdate(t, newStore(t)) })
	t.Run("Delete", func(t *testing.T) { testDelete(t, newStore(t)) })
	t.Run("DuplicateID", func(t *testing.T) { testDuplicate(t, newStore(t)) })
	t.Run("IdleExpiry", func(t *testing.T) { testExpiry(t, newStore(t)) })
	t.Run("GetExtendsLifetime", func(t *testing.T) { testTouch(t, newStore(t)) })
	t.Run("Concurrent", func(t *testing.T) { testConcurrent(t, newStore(t)) })
	t.Run("Admit", func(t *testing.T) { testAdmit(t, newStore(t)) })
	t.Run("AdmitConcurrent", func(t *testing.T) { testAdmitConcurrent(t, newStore(t)) })
}

// RunPubSub checks a [session.PubSub]: delivery in order to every
// subscriber of a channel and to no other, receiver counts, and Close.
// Each subtest gets a fresh store from newStore.
func RunPubSub(t *testing.T, newStore func(t *testing.T) session.PubSub) {
	t.Run("PublishSubscribe", func(t *testing.T) { testPubSub(t, newStore(t)) })
	t.Run("PublishWithoutSubscriber", func(t *testing.T) { testNoSubscriber(t, newStore(t)) })
	t.Run("SubscriptionClose", func(t *testing.T) { testClose(t, newStore(t)) })
}

// RunRecords checks a [session.Records]: PutIfAbsent, Load,
// CompareAndSwap, expiry, and a single winner among racing swaps. Each
// subtest gets a fresh store from newStore.
func RunRecords(t *testing.T, newStore func(t *testing.T) session.Records) {
	t.Run("PutIfAbsent", func(t *testing.T) { testPutIfAbsent(t, newStore(t)) })
	t.Run("CompareAndSwap", func(t *testing.T) { testCAS(t, newStore(t)) })
	t.Run("RecordExpiry", func(t *testing.T) { testRecordExpiry(t, newStore(t)) })
	t.Run("SingleWinner", func(t *testing.T) { testSingleWinner(t, newStore(t)) })
}

// RunEventLog checks a [session.EventLog]: consecutive sequence numbers,
// reading after a number, and expiry. Each subtest gets a fresh store from
// newStore.
func RunEventLog(t *testing.T, newStore func(t *testing.T) session.EventLog) {
	t.Run("EventLog", func(t *testing.T) { testEventLog(t, newStore(t)) })
	t.Run("EventLogExpiry", func(t *testing.T) { testEventLogExpiry(t, newStore(t)) })
}

func sample(id string) *session.Session {
	return &session.Session{
		ID:              id,
		Owner:           "4:acme/alice",
		ProtocolVersion: "2025-11-25",
		ClientName:      "client",
		ClientVersion:   "1.0",
		Capabilities:    session.CapElicitationForm | session.CapSampling,
		TTL:             time.Minute,
		Created:         time.UnixMilli(1_767_225_600_123),
	}
}

func testCreateGet(t *testing.T, st session.Sessions) {
	ctx := context.Background()
	want := sample("s1")
	if err := st.Create(ctx, want); err != nil {
		t.Fatalf("Create: %v", err)
	}
	got, err := st.Get(ctx, "s1")
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if fmt.Sprint(*got) != fmt.Sprint(*want) {
		t.Fatalf("Get = %+v, want %+v", *got, *want)
	}
	if _, err := st.Get(ctx, "missing"); !errors.Is(err, session.ErrNotFound) {
		t.Fatalf("Get(missing) error = %v, want ErrNotFound", err)
	}
}

func testCopy(t *testing.T, st session.Sessions) {
	ctx := context.Background()
	s := sample("s1")
	s.Subscriptions = []string{"a://1"}
	if err := st.Create(ctx, s); err != nil {
		t.Fatal(err)
	}
	s.Subscriptions[0] = "changed"
	got, _ := st.Get(ctx, "s1")
	got.LogLevel = "debug"
	got.Subscriptions[0] = "changed too"
	again, _ := st.Get(ctx, "s1")
	if again.LogLevel != "" || again.Subscriptions[0] != "a://1" {
		t.Fatalf("store shares memory with its callers: %+v", again)
	}
}

func testUpdate(t *testing.T, st session.Sessions) {
	ctx := context.Background()
	if err := st.Create(ctx, sample("s1")); err != nil {
		t.Fatal(err)
	}
	s, _ := st.Get(ctx, "s1")
	s.Initialized = true
	s.LogLevel = "warning"
	s.Subscriptions = []string{"x://1", "x://2"}
	if err := st.Update(ctx, s); err != nil {
		t.Fatalf("Update: %v", err)
	}
	got, _ := st.Get(ctx, "s1")
	if !got.Initialized || got.LogLevel != "warning" || !slices.Equal(got.Subscriptions, s.Subscriptions) {
		t.Fatalf("after Update: %+v", got)
	}
	if got.Owner != "4:acme/alice" || got.ProtocolVersion != "2025-11-25" {
		t.Fatalf("Update lost fields: %+v", got)
	}
	// Every field but ID and Owner is replaced; the owner never changes.
	s.Owner = "7:globex/carol"
	s.ProtocolVersion = "2024-11-05"
	s.Capabilities = session.CapRoots
	if err := st.Update(ctx, s); err != nil {
		t.Fatal(err)
	}
	got, _ = st.Get(ctx, "s1")
	if got.Owner != "4:acme/alice" || got.ProtocolVersion != "2024-11-05" || got.Capabilities != session.CapRoots {
		t.Fatalf("after a second Update: %+v", got)
	}
	if !got.Created.Equal(sample("s1").Created) {
		t.Fatalf("Created after two Updates = %v, want %v", got.Created, sample("s1").Created)
	}
	if err := st.Update(ctx, sample("missing")); !errors.Is(err, session.ErrNotFound) {
		t.Fatalf("Update(missing) = %v, want ErrNotFound", err)
	}
}

func testDelete(t *testing.T, st session.Sessions) {
	ctx := context.Background()
	if err := st.Create(ctx, sample("s1")); err != nil {
		t.Fatal(err)
	}
	if err := st.Delete(ctx, "s1"); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if _, err := st.Get(ctx, "s1"); !errors.Is(err, session.ErrNotFound) {
		t.Fatalf("Get after Delete = %v, want ErrNotFound", err)
	}
	if err := st.Delete(ctx, "s1"); err != nil {
		t.Fatalf("second Delete: %v", err)
	}
	s := sample("s1")
	if err := st.Update(ctx, s); !errors.Is(err, session.ErrNotFound) {
		t.Fatalf("Update after Delete = %v, want ErrNotFound", err)
	}
}

func testDuplicate(t *testing.T, st session.Sessions) {
	ctx := context.Background()
	if err := st.Create(ctx, sample("s1")); err != nil {
		t.Fatal(err)
	}
	other := sample("s1")
	other.Owner = "7:globex/carol"
	if err := st.Create(ctx, other); err == nil {
		t.Fatal("Create with a taken id succeeded")
	}
	got, _ := st.Get(ctx, "s1")
	if got.Owner != "4:acme/alice" {
		t.Fatalf("a duplicate Create replaced the session: owner %q", got.Owner)
	}
}

func testExpiry(t *testing.T, st session.Sessions) {
	ctx := context.Background()
	s := sample("s1")
	s.TTL = 100 * time.Millisecond
	if err := st.Create(ctx, s); err != nil {
		t.Fatal(err)
	}
	time.Sleep(250 * time.Millisecond)
	if _, err := st.Get(ctx, "s1"); !errors.Is(err, session.ErrNotFound) {
		t.Fatalf("Get after TTL = %v, want ErrNotFound", err)
	}
}

func testTouch(t *testing.T, st session.Sessions) {
	ctx := context.Background()
	s := sample("s1")
	s.TTL = 300 * time.Millisecond
	if err := st.Create(ctx, s); err != nil {
		t.Fatal(err)
	}
	for range 4 {
		time.Sleep(150 * time.Millisecond)
		if _, err := st.Get(ctx, "s1"); err != nil {
			t.Fatalf("a session in use expired: %v", err)
		}
	}
}

func recv(t *testing.T, sub session.Subscription) []byte {
	t.Helper()
	select {
	case b := <-sub.C():
		return b
	case <-time.After(5 * time.Second):
		t.Fatal("no message within 5s")
		return nil
	}
}

func testPubSub(t *testing.T, st session.PubSub) {
	ctx := context.Background()
	a, err := st.Subscribe(ctx, "ch")
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := st.Subscribe(ctx, "ch")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	other, _ := st.Subscribe(ctx, "other")
	defer other.Close()
	n, err := st.Publish(ctx, "ch", []byte("one"))
	if err != nil || n != 2 {
		t.Fatalf("Publish = %d, %v; want 2 receivers", n, err)
	}
	st.Publish(ctx, "ch", []byte("two"))
	for _, s := range []session.Subscription{a, b} {
		if got := string(recv(t, s)); got != "one" {
			t.Fatalf("first message %q", got)
		}
		if got := string(recv(t, s)); got != "two" {
			t.Fatalf("second message %q", got)
		}
	}
	select {
	case m := <-other.C():
		t.Fatalf("another channel received %q", m)
	case <-time.After(50 * time.Millisecond):
	}
}

func testNoSubscriber(t *testing.T, st session.PubSub) {
	n, err := st.Publish(context.Background(), "nobody", []byte("x"))
	if err != nil || n != 0 {
		t.Fatalf("Publish with no subscriber = %d, %v; want 0, nil", n, err)
	}
}

func testClose(t *testing.T, st session.PubSub) {
	ctx := context.Background()
	sub, err := st.Subscribe(ctx, "ch")
	if err != nil {
		t.Fatal(err)
	}
	if err := sub.Close(); err != nil {
		t.Fatal(err)
	}
	if err := sub.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if n, _ := st.Publish(ctx, "ch", []byte("x")); n != 0 {
		t.Fatalf("a closed subscription was counted: %d", n)
	}
	for range sub.C() {
	}
}

func testConcurrent(t *testing.T, st session.Sessions) {
	ctx := context.Background()
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			id := fmt.Sprintf("c%d", i)
			if err := st.Create(ctx, sample(id)); err != nil {
				t.Error(err)
				return
			}
			for range 20 {
				s, err := st.Get(ctx, id)
				if err != nil {
					t.Error(err)
					return
				}
				s.LogLevel = "info"
				if err := st.Update(ctx, s); err != nil {
					t.Error(err)
				}
			}
			st.Delete(ctx, id)
		})
	}
	wg.Wait()
}

func testPutIfAbsent(t *testing.T, st session.Records) {
	ctx := context.Background()
	ok, err := st.PutIfAbsent(ctx, "k", []byte("v1"), time.Minute)
	if err != nil || !ok {
		t.Fatalf("first PutIfAbsent = %v, %v", ok, err)
	}
	ok, err = st.PutIfAbsent(ctx, "k", []byte("v2"), time.Minute)
	if err != nil || ok {
		t.Fatalf("second PutIfAbsent = %v, %v; want false", ok, err)
	}
	if v, err := st.Load(ctx, "k"); err != nil || string(v) != "v1" {
		t.Fatalf("Load = %q, %v", v, err)
	}
	if _, err := st.Load(ctx, "missing"); !errors.Is(err, session.ErrNotFound) {
		t.Fatalf("Load(missing) = %v, want ErrNotFound", err)
	}
}

func testCAS(t *testing.T, st session.Records) {
	ctx := context.Background()
	if ok, err := st.CompareAndSwap(ctx, "k", []byte("a"), []byte("b"), time.Minute); err != nil || ok {
		t.Fatalf("CAS on a missing key = %v, %v", ok, err)
	}
	st.PutIfAbsent(ctx, "k", []byte("a"), time.Minute)
	if ok, _ := st.CompareAndSwap(ctx, "k", []byte("x"), []byte("b"), time.Minute); ok {
		t.Fatal("CAS with a wrong old value swapped")
	}
	if ok, err := st.CompareAndSwap(ctx, "k", []byte("a"), []byte("b"), time.Minute); err != nil || !ok {
		t.Fatalf("CAS = %v, %v", ok, err)
	}
	if v, _ := st.Load(ctx, "k"); string(v) != "b" {
		t.Fatalf("after CAS: %q", v)
	}
	if ok, _ := st.CompareAndSwap(ctx, "k", []byte("a"), []byte("c"), time.Minute); ok {
		t.Fatal("a second CAS from the same old value swapped")
	}
}

func testRecordExpiry(t *testing.T, st session.Records) {
	ctx := context.Background()
	st.PutIfAbsent(ctx, "k", []byte("v"), 100*time.Millisecond)
	st.PutIfAbsent(ctx, "k2", []byte("a"), time.Minute)
	st.CompareAndSwap(ctx, "k2", []byte("a"), []byte("b"), 100*time.Millisecond)
	time.Sleep(250 * time.Millisecond)
	for _, k := range []string{"k", "k2"} {
		if _, err := st.Load(ctx, k); !errors.Is(err, session.ErrNotFound) {
			t.Fatalf("Load(%s) after its ttl = %v, want ErrNotFound", k, err)
		}
	}
	if ok, _ := st.PutIfAbsent(ctx, "k", []byte("again"), time.Minute); !ok {
		t.Fatal("PutIfAbsent over an expired key failed")
	}
}

// testSingleWinner races many CompareAndSwap calls from one state: exactly
// one wins, which is what makes a confirm single-use.
func testSingleWinner(t *testing.T, st session.Records) {
	ctx := context.Background()
	st.PutIfAbsent(ctx, "confirm", []byte("pending"), time.Minute)
	var wins sync.WaitGroup
	var mu sync.Mutex
	n := 0
	for i := range 32 {
		wins.Go(func() {
			ok, err := st.CompareAndSwap(ctx, "confirm", []byte("pending"), fmt.Appendf(nil, "taken by %d", i), time.Minute)
			if err != nil {
				t.Error(err)
			}
			if ok {
				mu.Lock()
				n++
				mu.Unlock()
			}
		})
	}
	wins.Wait()
	if n != 1 {
		t.Fatalf("%d winners, want exactly 1", n)
	}
}

func testEventLog(t *testing.T, st session.EventLog) {
	ctx := context.Background()
	for i, d := range []string{"a", "b", "c"} {
		seq, err := st.AppendEvent(ctx, "s1", []byte(d), time.Minute)
		if err != nil || seq != uint64(i+1) {
			t.Fatalf("AppendEvent %s = %d, %v; want %d", d, seq, err, i+1)
		}
	}
	st.AppendEvent(ctx, "s2", []byte("other"), time.Minute)
	evs, err := st.EventsAfter(ctx, "s1", 1)
	if err != nil || len(evs) != 2 || evs[0].Seq != 2 || string(evs[0].Data) != "b" || evs[1].Seq != 3 || string(evs[1].Data) != "c" {
		t.Fatalf("EventsAfter(1) = %+v, %v", evs, err)
	}
	if evs, _ := st.EventsAfter(ctx, "s1", 3); len(evs) != 0 {
		t.Fatalf("EventsAfter(last) = %+v", evs)
	}
	if evs, err := st.EventsAfter(ctx, "unknown", 0); err != nil || len(evs) != 0 {
		t.Fatalf("EventsAfter(unknown) = %+v, %v", evs, err)
	}
}

func testEventLogExpiry(t *testing.T, st session.EventLog) {
	ctx := context.Background()
	st.AppendEvent(ctx, "s1", []byte("a"), 100*time.Millisecond)
	time.Sleep(250 * time.Millisecond)
	if evs, _ := st.EventsAfter(ctx, "s1", 0); len(evs) != 0 {
		t.Fatalf("events outlived their ttl: %+v", evs)
	}
	if seq, _ := st.AppendEvent(ctx, "s1", []byte("b"), time.Minute); seq != 1 {
		t.Fatalf("a new log after expiry starts at %d, want 1", seq)
	}
}

// admit creates the session id of owner and admits it with max.
func admit(t *testing.T, st session.Sessions, owner, id string, ttl time.Duration, max int) []string {
	t.Helper()
	s := sample(id)
	s.Owner, s.TTL = owner, ttl
	if err := st.Create(context.Background(), s); err != nil {
		t.Fatalf("Create(%s): %v", id, err)
	}
	ended, err := st.Admit(context.Background(), s, max)
	if err != nil {
		t.Fatalf("Admit(%s): %v", id, err)
	}
	return ended
}

func alive(st session.Sessions, id string) bool {
	_, err := st.Get(context.Background(), id)
	return err == nil
}

func testAdmit(t *testing.T, st session.Sessions) {
	ctx := context.Background()
	const alice, bob = "4:acme/alice", "4:acme/bob"
	for _, id := range []string{"a1", "a2", "a3"} {
		if ended := admit(t, st, alice, id, time.Minute, 3); len(ended) != 0 {
			t.Fatalf("admitting %s under the limit ended %v", id, ended)
		}
	}
	admit(t, st, bob, "b1", time.Minute, 3)
	if ended := admit(t, st, alice, "a4", time.Minute, 3); !slices.Equal(ended, []string{"a1"}) {
		t.Fatalf("the fourth session ended %v, want [a1]", ended)
	}
	if alive(st, "a1") || !alive(st, "a2") || !alive(st, "a4") || !alive(st, "b1") {
		t.Fatal("Admit ended the wrong sessions")
	}
	// A deleted session does not count.
	st.Delete(ctx, "a3")
	if ended := admit(t, st, alice, "a5", time.Minute, 3); len(ended) != 0 {
		t.Fatalf("with a3 deleted, admitting a5 ended %v", ended)
	}
	// Neither does an expired one.
	admit(t, st, bob, "b2", 100*time.Millisecond, 2)
	time.Sleep(250 * time.Millisecond)
	if ended := admit(t, st, bob, "b3", time.Minute, 2); len(ended) != 0 {
		t.Fatalf("with b2 expired, admitting b3 ended %v", ended)
	}
	if ended := admit(t, st, bob, "b4", time.Minute, 2); !slices.Equal(ended, []string{"b1"}) {
		t.Fatalf("admitting b4 ended %v, want [b1]", ended)
	}
	// Two over the limit at once end the two oldest, oldest first.
	if ended := admit(t, st, alice, "a6", time.Minute, 1); !slices.Equal(ended, []string{"a2", "a4", "a5"}) {
		t.Fatalf("admitting a6 with max 1 ended %v, want [a2 a4 a5]", ended)
	}
}

func testAdmitConcurrent(t *testing.T, st session.Sessions) {
	const owner, n, max = "5:carol/carol", 12, 4
	var mu sync.Mutex
	ended := map[string]int{}
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			s := sample(fmt.Sprintf("c%d", i))
			s.Owner = owner
			if err := st.Create(context.Background(), s); err != nil {
				t.Error(err)
				return
			}
			e, err := st.Admit(context.Background(), s, max)
			if err != nil {
				t.Error(err)
			}
			mu.Lock()
			for _, id := range e {
				ended[id]++
			}
			mu.Unlock()
		})
	}
	wg.Wait()
	live := 0
	for i := range n {
		id := fmt.Sprintf("c%d", i)
		if alive(st, id) {
			live++
			if ended[id] != 0 {
				t.Errorf("%s is alive but was reported ended", id)
			}
		} else if ended[id] != 1 {
			t.Errorf("%s is gone but was reported ended %d times", id, ended[id])
		}
	}
	if live != max {
		t.Fatalf("%d sessions alive after %d concurrent admits with max %d", live, n, max)
	}
}
