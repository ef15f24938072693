package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mcphandler/mcphandler/session"
	"github.com/mcphandler/mcphandler/session/redisstore/redistest"
)

// seeds returns redis://first?addr=second&addr=... for addrs, with the
// extra query parameters q.
func seeds(addrs []string, q string) string {
	var b strings.Builder
	b.WriteString("redis://" + addrs[0] + "?")
	for _, a := range addrs[1:] {
		b.WriteString("addr=" + a + "&")
	}
	return b.String() + q
}

// TestNewClientTopologies builds a store from the URL of each topology —
// one server, a Redis Cluster, a master watched by Sentinels — and uses
// it on real Redis: a session, a record swapped, a message through the
// store's Pub/Sub (a shard channel on the cluster), and Ready.
func TestNewClientTopologies(t *testing.T) {
	for _, tc := range []struct {
		kind Kind
		url  func(t testing.TB) string
		want string // the client's type
	}{
		{Single, redistest.URL, "*redis.Client"},
		{"", redistest.URL, "*redis.Client"},
		{Cluster, func(t testing.TB) string { return seeds(redistest.SharedCluster(t).Addrs(), "") }, "*redis.ClusterClient"},
		{Sentinel, func(t testing.TB) string {
			return seeds(redistest.SharedSentinel(t).Addrs(), "master_name="+redistest.SentinelMaster)
		}, "*redis.Client"},
	} {
		t.Run(kindName(tc.kind)+"/"+string(tc.kind), func(t *testing.T) {
			c, err := NewClient(tc.kind, tc.url(t))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
			if got := fmt.Sprintf("%T", c); got != tc.want {
				t.Fatalf("client %s, want %s", got, tc.want)
			}
			st := newStoreOn(t, c, redistest.Prefix(t, c))
			ctx := t.Context()
			if err := st.Ready(ctx); err != nil {
				t.Fatalf("Ready: %v", err)
			}
			if err := st.Create(ctx, sample("s1")); err != nil {
				t.Fatal(err)
			}
			if s, err := st.Get(ctx, "s1"); err != nil || s.Owner != sample("s1").Owner {
				t.Fatalf("Get: %+v %v", s, err)
			}
			if ok, err := st.PutIfAbsent(ctx, "k", []byte("v"), time.Minute); !ok || err != nil {
				t.Fatalf("PutIfAbsent: %v %v", ok, err)
			}
			if ok, err := st.CompareAndSwap(ctx, "k", []byte("v"), []byte("w"), time.Minute); !ok || err != nil {
				t.Fatalf("CompareAndSwap: %v %v", ok, err)
			}
			sub, err := st.Subscribe(ctx, "ch")
			if err != nil {
				t.Fatal(err)
			}
			defer sub.Close()
			if n, err := st.Publish(ctx, "ch", []byte("hi")); n != 1 || err != nil {
				t.Fatalf("Publish: %d %v", n, err)
			}
			if got := recv(t, sub, 5*time.Second); string(got) != "hi" {
				t.Fatalf("received %q", got)
			}
		})
	}
}

// settings are the client settings the store depends on.
type settings struct {
	contextTimeout bool
	dialTimeout    time.Duration
	dialerRetries  int
}

func settingsOf(t *testing.T, c redis.UniversalClient) settings {
	t.Helper()
	switch c := c.(type) {
	case *redis.Client: // one server, or the failover client's master
		o := c.Options()
		return settings{o.ContextTimeoutEnabled, o.DialTimeout, o.DialerRetries}
	case *redis.ClusterClient:
		o := c.Options()
		return settings{o.ContextTimeoutEnabled, o.DialTimeout, o.DialerRetries}
	}
	t.Fatalf("client %T", c)
	return settings{}
}

// TestNewClientSettings: whatever the URL says, the client lets a context
// deadline interrupt socket I/O (a failover URL may turn that off), dials
// for at most a second (the URL's dial_timeout if shorter; not go-redis's
// five seconds, and never without a bound), and makes one dial attempt
// unless the URL sets dialer_retries.
func TestNewClientSettings(t *testing.T) {
	def := settings{true, DefaultDialTimeout, 1}
	for _, tc := range []struct {
		kind Kind
		url  string
		want settings
	}{
		{Single, "redis://127.0.0.1:1/0", def},
		{Single, "rediss://u:p@127.0.0.1:1/2?dial_timeout=300ms", settings{true, 300 * time.Millisecond, 1}},
		{Single, "redis://127.0.0.1:1?dial_timeout=-1", def},
		{Single, "unix:///tmp/redis.sock?db=1", def},
		{Cluster, "redis://127.0.0.1:1?addr=127.0.0.1:2", def},
		{Cluster, "redis://127.0.0.1:1?dial_timeout=0&dialer_retries=3", settings{true, DefaultDialTimeout, 3}},
		{Sentinel, "redis://127.0.0.1:1?master_name=m", def},
		{Sentinel, "redis://127.0.0.1:1?master_name=m&context_timeout_enabled=false&dial_timeout=5s", def},
		{Cluster, "redis://127.0.0.1:1?dial_timeout=2s", def},
		{Single, "redis://127.0.0.1:1?dial_timeout=1001ms", def},
	} {
		c, err := NewClient(tc.kind, tc.url)
		if err != nil {
			t.Errorf("%s %s: %v", tc.kind, tc.url, err)
			continue
		}
		if got := settingsOf(t, c); got != tc.want {
			t.Errorf("%s %s: %+v, want %+v", tc.kind, tc.url, got, tc.want)
		}
		c.Close()
	}
}

// TestNewClientRefuses: a URL the store cannot work with, or that
// go-redis cannot apply, is an error naming why — never a panic (go-redis
// panics on a pool size past 32 bits, and on a failover client asked to
// route reads), never a client that reads stale replicas, and never an
// error that repeats the password, even when a password with an unencoded
// '/' makes the parsers read part of it as a port or a path.
func TestNewClientRefuses(t *testing.T) {
	const secret = "s3cr3tpw"
	for _, tc := range []struct {
		kind Kind
		url  string
		want string
	}{
		{"ring", "redis://127.0.0.1:6379", "unknown kind"},
		{"SINGLE", "redis://127.0.0.1:6379", "unknown kind"},
		{Single, "http://127.0.0.1:6379", "scheme"},
		{Single, "redis://127.0.0.1:6379?addr=127.0.0.1:6380", "unexpected option"},
		{Single, "redis://127.0.0.1:6379?bogus=1", "unexpected option"},
		{Single, "redis://127.0.0.1:6379/x", "database"},
		{Single, "redis://127.0.0.1:6379?pool_size=3000000000", "more than go-redis takes"},
		{Cluster, "redis://127.0.0.1:6379?pool_size=3000000000", "more than go-redis takes"},
		{Sentinel, "redis://127.0.0.1:6379?master_name=m&pool_size=3000000000", "more than go-redis takes"},
		{Single, "redis://127.0.0.1:6379?pipeline_pool_size=3000000000", "more than go-redis takes"},
		{Cluster, "redis://127.0.0.1:6379?max_active_conns=3000000000", "more than go-redis takes"},
		{Cluster, "redis://127.0.0.1:6379?read_only=true", "replicas"},
		{Cluster, "redis://127.0.0.1:6379?route_by_latency=true", "replicas"},
		{Cluster, "redis://127.0.0.1:6379?route_randomly=true", "replicas"},
		{Sentinel, "redis://127.0.0.1:26379", "master_name"},
		{Sentinel, "redis://127.0.0.1:26379?master_name=m&replica_only=true", "replicas"},
		{Sentinel, "redis://127.0.0.1:26379?master_name=m&route_by_latency=true", "replicas"},
		{Sentinel, "redis://127.0.0.1:26379?master_name=m&route_randomly=true", "replicas"},
		{Single, "redis://user:" + secret + "@127.0.0.1:6379/\x7f", "malformed"},
		{Single, "redis://user:" + secret + "/x@127.0.0.1:6379", "percent-encode"},
		{Single, "redis://user:12/" + secret + "@127.0.0.1:6379", "percent-encode"},
		{Cluster, "redis://user:" + secret + "/x@127.0.0.1:6379", "percent-encode"},
		{Sentinel, "redis://user:12/" + secret + "@127.0.0.1:6379?master_name=m", "percent-encode"},
		{Single, "redis://user:" + secret + "@127.0.0.1:6379?pool_size=x", "pool_size"},
		{Single, "redis://user:" + secret + "@[::1", "malformed"},
	} {
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("%s %q: panic %v", tc.kind, tc.url, r)
				}
			}()
			c, err := NewClient(tc.kind, tc.url)
			if err == nil {
				c.Close()
				t.Errorf("%s %q: no error", tc.kind, tc.url)
				return
			}
			if !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), "s3cr") {
				t.Errorf("%s %q: %v, want %q and no password", tc.kind, tc.url, err, tc.want)
			}
		}()
	}
}

// TestNewClientDownFailsFast: a store on a client of NewClient, to a port
// where nothing listens, answers every call with ErrUnavailable within its
// OpTimeout (the settings keep a refused dial from taking 1.3–1.8s), and
// Ready says so.
func TestNewClientDownFailsFast(t *testing.T) {
	addr, stop, _ := redistest.Start(t)
	stop()
	c, err := NewClient(Single, "redis://"+addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	st := newStoreWith(t, c, Options{OpTimeout: 300 * time.Millisecond})
	if err := st.Ready(context.Background()); !errors.Is(err, session.ErrUnavailable) {
		t.Fatalf("Ready with Redis down: %v", err)
	}
	failFast(t, st)
}
