package redisstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/mcphandler/mcphandler/session"
	"github.com/mcphandler/mcphandler/session/redisstore/redistest"
)

// createWithTTLs creates, through st, a sample session of each id with
// its TTL.
func createWithTTLs(t *testing.T, st *Store, ttls map[string]time.Duration) {
	t.Helper()
	for id, ttl := range ttls {
		s := sample(id)
		s.TTL = ttl
		if err := st.Create(context.Background(), s); err != nil {
			t.Fatal(err)
		}
	}
}

// Get restarts every record's TTL by the record's own, whatever TTL the
// store learnt last: sessions of two TTLs, created by one replica and read
// alternately by another that never wrote them, each get their own. A
// read whose record matches the learnt TTL is one GETEX; one that does
// not is read again by the script, and teaches its TTL.
func TestGetRestartsEachRecordsOwnTTL(t *testing.T) {
	for _, ap := range []bool{false, true} {
		t.Run(mode(ap), func(t *testing.T) {
			ctx := context.Background()
			c := redistest.Client(t)
			prefix := redistest.Prefix(t, c)
			a := newStoreWith(t, c, Options{Prefix: prefix, AutoPipeline: ap})
			b := newStoreWith(t, c, Options{Prefix: prefix, AutoPipeline: ap})
			ttls := map[string]time.Duration{"short": time.Minute, "long": 10 * time.Minute}
			createWithTTLs(t, a, ttls)
			h := new(redistest.CountingHook)
			c.AddHook(h)
			for i, id := range []string{"short", "short", "long", "long", "short", "long"} {
				// The record aged: only a restart brings its TTL back.
				if err := c.PExpire(ctx, a.key(id, kindSession), 5*time.Second).Err(); err != nil {
					t.Fatal(err)
				}
				h.Reset()
				if _, err := b.Get(ctx, id); err != nil {
					t.Fatalf("Get %d (%s): %v", i, id, err)
				}
				got := h.Counts().ByName
				ttl := c.PTTL(ctx, a.key(id, kindSession)).Val()
				if want := ttls[id]; ttl > want || ttl < want-5*time.Second {
					t.Errorf("Get %d (%s): PTTL %v, want about %v", i, id, ttl, want)
				}
				switch {
				case i > 0 && id == []string{"short", "short", "long", "long", "short", "long"}[i-1]:
					if fmt.Sprint(got) != fmt.Sprint(map[string]int64{"getex": 1}) {
						t.Errorf("Get %d (%s), same TTL as the last: commands %v, want one GETEX", i, id, got)
					}
				case got["evalsha"]+got["eval"] != 1:
					t.Errorf("Get %d (%s), another TTL: commands %v, want the script", i, id, got)
				}
			}
		})
	}
}

// A record whose header gives another TTL than the store learnt, or none
// it can read, is never returned from GETEX alone: the script reads it
// again, and what cannot be decoded is not found, as before.
func TestGetRecordWithForeignHeader(t *testing.T) {
	ctx := context.Background()
	c := redistest.Client(t)
	st := newStoreWith(t, c, Options{Prefix: redistest.Prefix(t, c)})
	if err := st.Create(ctx, sample("real")); err != nil {
		t.Fatal(err)
	}
	for name, v := range map[string]string{
		"same TTL, garbage after": "\x0260000:garbage",
		"no digits":               "\x02:1:x",
		"huge TTL":                "\x02" + "99999999999999999999" + ":1:x",
		"version 3":               "\x0360000:1:x",
		"empty":                   "",
	} {
		k := st.key("forged", kindSession)
		if err := c.Set(ctx, k, v, time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
		if _, err := st.Get(ctx, "forged"); !errors.Is(err, session.ErrNotFound) && !errors.Is(err, session.ErrUnavailable) {
			t.Errorf("%s: Get = %v, want not found or unavailable", name, err)
		}
		if _, err := st.Get(ctx, "real"); err != nil {
			t.Errorf("%s: Get of a real session afterwards: %v", name, err)
		}
	}
}

// Against a Redis user that may not run GETEX, Get takes the script
// every time and still restarts the TTL.
func TestGetWithoutGETEX(t *testing.T) {
	ctx := context.Background()
	admin := redistest.Client(t)
	prefix := redistest.Prefix(t, admin)
	user, pass := "mcph-test-"+uuid.NewString(), uuid.NewString()
	if err := admin.Do(ctx, "ACL", "SETUSER", user, "on", ">"+pass, "~*", "&*", "+@all", "-getex").Err(); err != nil {
		t.Skipf("ACL SETUSER: %v", err)
	}
	t.Cleanup(func() { admin.Do(context.Background(), "ACL", "DELUSER", user) })
	opts := redistest.Options(t)
	opts.Username, opts.Password = user, pass
	c := redis.NewClient(opts)
	defer c.Close()
	checkScriptedGets(t, newStoreWith(t, c, Options{Prefix: prefix}), admin)
}

// Against a Redis without GETEX (before 6.2; here the command renamed
// away), Get takes the script every time and still restarts the TTL.
func TestGetOnRedisWithoutGETEX(t *testing.T) {
	addr, _, _ := redistest.StartWith(t, "--rename-command", "GETEX", "")
	c := redistest.ClientAt(t, addr)
	checkScriptedGets(t, newStoreWith(t, c, Options{Prefix: redistest.Prefix(t, c), AutoPipeline: true}), c)
}

// checkScriptedGets checks that st, whose GETEX Redis refuses, serves a
// session whose record aged and restarts its TTL, every time, and stops
// trying GETEX; admin reads the TTL.
func checkScriptedGets(t *testing.T, st *Store, admin redis.UniversalClient) {
	t.Helper()
	ctx := context.Background()
	if err := st.Create(ctx, sample("s")); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		admin.PExpire(ctx, st.key("s", kindSession), 5*time.Second)
		if _, err := st.Get(ctx, "s"); err != nil {
			t.Fatalf("Get %d: %v", i, err)
		}
		if ttl := admin.PTTL(ctx, st.key("s", kindSession)).Val(); ttl < 50*time.Second {
			t.Fatalf("Get %d: PTTL %v, want the session's minute", i, ttl)
		}
	}
	if h := st.ttlHint.Load(); h != -1 {
		t.Errorf("ttlHint %d once GETEX was refused, want -1", h)
	}
}

// Gets of records of two TTLs, concurrent with Updates that change one
// session's TTL: every record ends with a TTL its record holds, and no
// Get fails.
func TestGetConcurrentTTLChanges(t *testing.T) {
	ctx := context.Background()
	c := redistest.Client(t)
	prefix := redistest.Prefix(t, c)
	a := newStoreWith(t, c, Options{Prefix: prefix, AutoPipeline: true})
	b := newStoreWith(t, c, Options{Prefix: prefix, AutoPipeline: true})
	for _, id := range []string{"x", "y"} {
		if err := a.Create(ctx, sample(id)); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				st := []*Store{a, b}[(g+i)%2]
				id := []string{"x", "y"}[i%2]
				if g == 0 && id == "x" {
					s := sample("x")
					s.TTL = time.Duration(1+i%3) * time.Minute
					if err := st.Update(ctx, s); err != nil {
						errs <- err
					}
					continue
				}
				if _, err := st.Get(ctx, id); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for _, id := range []string{"x", "y"} {
		k := a.key(id, kindSession)
		v, _ := c.Get(ctx, k).Result()
		// One last Get restarts it from the record as it stands.
		if _, err := b.Get(ctx, id); err != nil {
			t.Fatal(err)
		}
		ttl, own := c.PTTL(ctx, k).Val(), time.Duration(recordTTL(v))*time.Millisecond
		if ttl > own || ttl < own-5*time.Second {
			t.Errorf("%s: PTTL %v, its record's TTL %v", id, ttl, own)
		}
	}
}

// afterCommand runs f once each command named name has been answered,
// before the caller sees the reply.
type afterCommand struct {
	name string
	f    func()
}

func (h afterCommand) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h afterCommand) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if cmd.Name() == h.name {
			h.f()
		}
		return err
	}
}

func (h afterCommand) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		for _, cmd := range cmds {
			if cmd.Name() == h.name {
				h.f()
			}
		}
		return err
	}
}

// The connection is cut as GETEX, or the script that reads a record of
// another TTL again, reaches Redis. Cut once, go-redis sends the command
// again and the Get returns its session; cut every time, the Get fails as
// unavailable. Either way never as not found, never with another record;
// and no cut passes for a Redis that refuses GETEX: afterwards the store
// still reads a record of its learnt TTL with one GETEX.
func TestGetCutMidCommand(t *testing.T) {
	for _, ap := range []bool{false, true} {
		t.Run(mode(ap), func(t *testing.T) {
			ctx := context.Background()
			p := redistest.NewProxy(t, "")
			direct := redistest.Client(t)
			prefix := redistest.Prefix(t, direct)
			createWithTTLs(t, newStoreWith(t, direct, Options{Prefix: prefix}), map[string]time.Duration{"short": time.Minute, "long": 10 * time.Minute})
			c := p.Client(t)
			h := new(redistest.CountingHook)
			c.AddHook(h)
			st := newStoreWith(t, c, Options{Prefix: prefix, AutoPipeline: ap, OpTimeout: time.Second})
			get := func(what, id string, mayFail bool) {
				t.Helper()
				s, err := st.Get(ctx, id)
				switch {
				case err == nil && s.ID != id:
					t.Fatalf("%s: Get(%s) returned session %s", what, id, s.ID)
				case err != nil && (!mayFail || !errors.Is(err, session.ErrUnavailable)):
					t.Fatalf("%s: Get(%s): %v", what, id, err)
				}
			}
			get("learn the minute", "short", false)
			for _, cmd := range []string{"GETEX", "EVALSHA"} {
				id := map[string]string{"GETEX": "short", "EVALSHA": "long"}[cmd]
				cuts := p.Cuts()
				p.CutOnCommand(cmd, 1)
				get("cut once at "+cmd, id, true)
				// A read of "long" taught its TTL: learn the minute again,
				// so that the next one is read by the script again.
				get("learn the minute", "short", false)
				p.CutOnCommand(cmd, -1)
				if _, err := st.Get(ctx, id); !errors.Is(err, session.ErrUnavailable) {
					t.Fatalf("cut every time at %s: Get(%s): %v, want ErrUnavailable", cmd, id, err)
				}
				if p.Cuts() < cuts+2 {
					t.Fatalf("%s reached the proxy %d times", cmd, p.Cuts()-cuts)
				}
				p.ClearCuts()
				// The pool and the breaker may take a moment to recover.
				pollUntil(t, 3*time.Second, "a Get after the cuts", func() bool { _, err := st.Get(ctx, id); return err == nil })
				get("after the cuts at "+cmd, id, false)
			}
			get("learn the minute again", "short", false)
			h.Reset()
			get("same TTL", "short", false)
			if got := h.Counts().ByName; fmt.Sprint(got) != fmt.Sprint(map[string]int64{"getex": 1}) {
				t.Fatalf("after the cuts, a Get of the learnt TTL sent %v, want one GETEX", got)
			}
		})
	}
}

// A session deleted between the GETEX that found it with another TTL and
// the script that reads it again is not found: the store never returns
// what GETEX read without the script's check.
func TestGetDeletedBeforeScriptReread(t *testing.T) {
	for _, ap := range []bool{false, true} {
		t.Run(mode(ap), func(t *testing.T) {
			ctx := context.Background()
			c := redistest.Client(t)
			prefix := redistest.Prefix(t, c)
			writer := newStoreWith(t, redistest.Client(t), Options{Prefix: prefix})
			createWithTTLs(t, writer, map[string]time.Duration{"short": time.Minute, "long": 10 * time.Minute})
			st := newStoreWith(t, c, Options{Prefix: prefix, AutoPipeline: ap})
			if _, err := st.Get(ctx, "short"); err != nil { // learns the minute
				t.Fatal(err)
			}
			var once sync.Once
			c.AddHook(afterCommand{name: "getex", f: func() {
				once.Do(func() {
					if err := writer.Delete(ctx, "long"); err != nil {
						t.Error(err)
					}
				})
			}})
			if s, err := st.Get(ctx, "long"); !errors.Is(err, session.ErrNotFound) {
				t.Fatalf("Get of a session deleted after GETEX read it = %v, %v; want ErrNotFound", s, err)
			}
		})
	}
}
