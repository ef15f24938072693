package redisstore

import (
	"bytes"
	"context"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mcphandler/mcphandler/internal/golden"
	"github.com/mcphandler/mcphandler/session"
	"github.com/mcphandler/mcphandler/session/redisstore/redistest"
)

// The golden files of testdata/golden hold, byte for byte, how a Store
// lays out what the handler gives it: the session record, the Redis keys
// of each kind, the channels, and the keys, types and values a sequence
// of calls leaves in Redis. Replicas of two releases share one Redis
// during a rolling upgrade. Each case builds its value through the Store
// (the layout on the Redis of the tests, under a prefix of its own),
// compares it with its file, then reads the file back: the layout is
// written into Redis as the file says, and a Store must read it.
//
// go test -run TestGolden -update rewrites the files: only for a change
// that says how mixed releases still interoperate.

const goldenSID = "GOLDENSESSIONRANDOMPART234RWZIFHK35NC5P7M4"

// goldenFullSession is a session with every field set.
func goldenFullSession() *session.Session {
	return &session.Session{
		ID: goldenSID, Owner: "4:acme/alice", ProtocolVersion: "2025-11-25", ClientName: "golden-client", ClientVersion: "1.2.3",
		Capabilities: session.CapElicitationForm | session.CapElicitationURL | session.CapSampling | session.CapSamplingTools |
			session.CapRoots | session.CapRootsListChanged | session.CapUIApps,
		Initialized: true, LogLevel: "warning", Subscriptions: []string{"file:///srv/docs/readme.md", "file:///srv/docs/faq.md"},
		TTL: 45 * time.Minute, Created: time.UnixMilli(1_785_231_000_000),
	}
}

// goldenBareSession is a session as initialize stores it before anything else:
// no capabilities, the store's default TTL, no creation time.
func goldenBareSession() *session.Session {
	return &session.Session{ID: goldenSID, Owner: "0:/alice", ProtocolVersion: "2025-03-26"}
}

// TestGolden pins the session record, the key and channel names and the
// layout in Redis; see the comment at the top of this file.
func TestGolden(t *testing.T) {
	for _, c := range []struct {
		name string
		s    func() *session.Session
	}{{"session-record.golden", goldenFullSession}, {"session-record-minimal.golden", goldenBareSession}} {
		t.Run(strings.TrimSuffix(c.name, ".golden"), func(t *testing.T) {
			b := golden.File(t, c.name, encodeSession(c.s()))
			got, err := decodeSession(goldenSID, string(b))
			if err != nil {
				t.Fatal(err)
			}
			if want := c.s(); !reflect.DeepEqual(got, want) {
				t.Errorf("read\n%+v\nwant\n%+v", got, want)
			}
		})
	}
	t.Run("names", func(t *testing.T) {
		// New sends no command: the names need no Redis.
		sc := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
		defer sc.Close()
		cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}})
		defer cc.Close()
		single, cluster := New(sc, Options{}), New(cc, Options{})
		defer single.Close()
		defer cluster.Close()
		var b strings.Builder
		for _, kv := range [][2]string{
			{"session", single.key(goldenSID, kindSession)},
			{"record", single.key("confirm/mcphc-GOLDENCONFIRMRANDOMPART234", kindRecord)},
			{"event log", single.key("events/"+goldenSID+"/p0123456789abcdef", kindLog)},
			{"sessions of an owner", single.key("owner/4:acme/alice", kindOwner)},
		} {
			fmt.Fprintf(&b, "%s = %s\n", kv[0], kv[1])
		}
		for _, ch := range []string{"notify", "cancel", "session/" + goldenSID, "reply/" + goldenSID + "/mcph-GOLDENREQUESTXRANDOMPART2",
			"live/" + goldenSID + "/p0123456789abcdef", "task-signal", "task-status/b73eba878d7b1ac6c856661f97750244",
			"approval-state", "approval/GoldenApprovalId012345", evictChannel} {
			name, _ := single.channelName(ch)
			cname, tag := cluster.channelName(ch)
			fmt.Fprintf(&b, "channel %s = %s, on a cluster %s (shard %s)\n", ch, name, cname, tag)
		}
		want := golden.File(t, "names.golden", []byte(b.String()))
		if !bytes.Contains(want, []byte("session = mcph:{"+goldenSID+"}:s\n")) || !bytes.Contains(want, []byte("channel notify = mcph:notify, on a cluster mcph:{")) {
			t.Errorf("names %q", want)
		}
	})
	t.Run("redis-layout", func(t *testing.T) {
		c := redistest.Client(t)
		prefix := redistest.Prefix(t, c)
		layout := goldenLayout(t, c, prefix)
		want := golden.File(t, "redis-layout.golden", layout)
		readLayout(t, want)
	})
}

// goldenLayout makes, through Stores under prefix, one of each thing the
// handler keeps in Redis and publishes, and lists what Redis then holds
// and what was published, with the prefix written <prefix>.
func goldenLayout(t *testing.T, c redis.UniversalClient, prefix string) []byte {
	ctx := context.Background()
	// A subscriber of every channel under the prefix.
	ps := c.PSubscribe(ctx, prefix+"*")
	defer ps.Close()
	if _, err := ps.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	st := newStoreOn(t, c, prefix)
	cached := newStoreWith(t, c, Options{Prefix: prefix, CacheTTL: time.Minute})
	s := goldenFullSession()
	if err := st.Create(ctx, s); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Admit(ctx, s, 5); err != nil {
		t.Fatal(err)
	}
	// An Update (on a replica with a cache, which tells the others).
	s.LogLevel, s.Subscriptions = "debug", s.Subscriptions[:1]
	if err := cached.Update(ctx, s); err != nil {
		t.Fatal(err)
	}
	if ok, err := st.PutIfAbsent(ctx, "confirm/mcphc-GOLDENCONFIRMRANDOMPART234", []byte("r\x00golden record"), time.Minute); !ok || err != nil {
		t.Fatal(ok, err)
	}
	if ok, err := st.PutIfAbsent(ctx, "nonce/GOLDENNONCEXRANDOMPART2345", []byte("pending"), time.Minute); !ok || err != nil {
		t.Fatal(ok, err)
	}
	if ok, err := st.CompareAndSwap(ctx, "nonce/GOLDENNONCEXRANDOMPART2345", []byte("pending"), []byte("done"), time.Minute); !ok || err != nil {
		t.Fatal(ok, err)
	}
	for _, e := range []string{"sP", "sM{\"jsonrpc\":\"2.0\"}"} {
		if _, err := st.AppendEvent(ctx, "events/"+goldenSID+"/p0123456789abcdef", []byte(e), time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.Publish(ctx, "notify", []byte("m\x00golden message")); err != nil {
		t.Fatal(err)
	}
	var lines []string
	// The messages: the eviction of the Update, then the one published.
	for range 2 {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		m, err := ps.ReceiveMessage(rctx)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, "publish "+strings.Replace(m.Channel, prefix, "<prefix>", 1)+" "+strconv.QuoteToASCII(m.Payload))
	}
	slices.Sort(lines)
	var keys []string
	it := c.Scan(ctx, 0, prefix+"*", 1000).Iterator()
	for it.Next(ctx) {
		keys = append(keys, it.Val())
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if ttl := c.PTTL(ctx, k).Val(); ttl <= 0 {
			t.Errorf("%s has no expiry (%v)", k, ttl)
		}
		typ := c.Type(ctx, k).Val()
		var vals []string
		switch typ {
		case "string":
			vals = []string{c.Get(ctx, k).Val()}
		case "list":
			vals = c.LRange(ctx, k, 0, -1).Val()
		default:
			t.Fatalf("%s: a %s", k, typ)
		}
		line := strings.Replace(k, prefix, "<prefix>", 1) + " " + typ
		for _, v := range vals {
			line += " " + strconv.QuoteToASCII(v)
		}
		lines = append(lines, line)
	}
	return []byte(strings.Join(lines, "\n") + "\n")
}

// readLayout writes the keys of a golden layout into Redis under a prefix
// of its own and reads them through a Store, as a replica of the release
// that reads them would.
func readLayout(t *testing.T, layout []byte) {
	ctx := context.Background()
	c := redistest.Client(t)
	prefix := redistest.Prefix(t, c)
	for line := range strings.Lines(string(layout)) {
		key, rest, _ := strings.Cut(strings.TrimSuffix(line, "\n"), " ")
		typ, rest, _ := strings.Cut(rest, " ")
		var vals []string
		for rest != "" {
			q, err := strconv.QuotedPrefix(rest)
			if err != nil {
				t.Fatalf("line %q: %v", line, err)
			}
			v, _ := strconv.Unquote(q)
			vals = append(vals, v)
			rest = strings.TrimPrefix(rest[len(q):], " ")
		}
		if key == "publish" {
			continue
		}
		key = strings.Replace(key, "<prefix>", prefix, 1)
		switch typ {
		case "string":
			c.Set(ctx, key, vals[0], time.Minute)
		case "list":
			c.RPush(ctx, key, toAny(vals)...)
			c.PExpire(ctx, key, time.Minute)
		default:
			t.Fatalf("line %q", line)
		}
	}
	st := newStoreOn(t, c, prefix)
	want := goldenFullSession()
	want.LogLevel, want.Subscriptions = "debug", want.Subscriptions[:1]
	if got, err := st.Get(ctx, goldenSID); err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("Get: %+v, %v", got, err)
	}
	if b, err := st.Load(ctx, "confirm/mcphc-GOLDENCONFIRMRANDOMPART234"); err != nil || string(b) != "r\x00golden record" {
		t.Errorf("Load: %q, %v", b, err)
	}
	if b, err := st.Load(ctx, "nonce/GOLDENNONCEXRANDOMPART2345"); err != nil || string(b) != "done" {
		t.Errorf("Load: %q, %v", b, err)
	}
	evs, err := st.EventsAfter(ctx, "events/"+goldenSID+"/p0123456789abcdef", 1)
	if err != nil || len(evs) != 1 || evs[0].Seq != 2 || string(evs[0].Data) != "sM{\"jsonrpc\":\"2.0\"}" {
		t.Errorf("EventsAfter: %+v, %v", evs, err)
	}
	// The owner's list counts the session: one more past a max of 1 ends it.
	other := goldenBareSession()
	other.ID, other.Owner = "GOLDENOTHERSESSIONRANDOMPART234RWZIFHK35N", want.Owner
	if err := st.Create(ctx, other); err != nil {
		t.Fatal(err)
	}
	if ended, err := st.Admit(ctx, other, 1); err != nil || !slices.Equal(ended, []string{goldenSID}) {
		t.Errorf("Admit: %v, %v", ended, err)
	}
}

func toAny(vs []string) []any {
	out := make([]any, len(vs))
	for i, v := range vs {
		out[i] = v
	}
	return out
}
