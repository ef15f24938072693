package redisflag

import (
	"errors"
	"flag"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func parse(t *testing.T, args []string, env map[string]string) (Topology, error) {
	t.Helper()
	fs := flag.NewFlagSet("cmd", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	f := Register(fs, func(k string) string { return env[k] })
	if err := fs.Parse(args); err != nil {
		t.Fatalf("Parse(%q): %v", args, err)
	}
	return f.Topology()
}

func TestTopology(t *testing.T) {
	for _, tc := range []struct {
		name   string
		args   []string
		env    map[string]string
		want   Topology
		errHas string // a usage error containing this
	}{
		{name: "nothing", want: Topology{}},
		{name: "url", args: []string{"-redis", "redis://127.0.0.1:6379/2"},
			want: Topology{Kind: Single, URL: "redis://127.0.0.1:6379/2", From: "-redis"}},
		{name: "cluster", args: []string{"-redis-cluster", "10.0.0.1:7000, 10.0.0.2:7000,[::1]:7001"},
			want: Topology{Kind: Cluster, Addrs: []string{"10.0.0.1:7000", "10.0.0.2:7000", "[::1]:7001"}, From: "-redis-cluster"}},
		{name: "sentinel", args: []string{"-redis-sentinel=mymaster@s1:26379,s2:26379"},
			want: Topology{Kind: Sentinel, Master: "mymaster", Addrs: []string{"s1:26379", "s2:26379"}, From: "-redis-sentinel"}},
		{name: "env url", env: map[string]string{"REDIS_URL": "redis://r:6379"},
			want: Topology{Kind: Single, URL: "redis://r:6379", From: "$REDIS_URL"}},
		{name: "env cluster", env: map[string]string{"REDIS_CLUSTER": "a:1"},
			want: Topology{Kind: Cluster, Addrs: []string{"a:1"}, From: "$REDIS_CLUSTER"}},
		{name: "env sentinel", env: map[string]string{"REDIS_SENTINEL": "m@a:1"},
			want: Topology{Kind: Sentinel, Master: "m", Addrs: []string{"a:1"}, From: "$REDIS_SENTINEL"}},
		{name: "a flag wins over the environment", args: []string{"-redis-cluster", "a:1"},
			env:  map[string]string{"REDIS_URL": "redis://r:6379", "REDIS_SENTINEL": "m@s:1"},
			want: Topology{Kind: Cluster, Addrs: []string{"a:1"}, From: "-redis-cluster"}},
		{name: "an empty flag keeps memory", args: []string{"-redis="},
			env: map[string]string{"REDIS_URL": "redis://r:6379"}, want: Topology{}},
		{name: "two flags", args: []string{"-redis", "redis://r:6379", "-redis-cluster", "a:1"}, errHas: "-redis and -redis-cluster"},
		{name: "three flags", args: []string{"-redis-cluster", "a:1", "-redis-sentinel", "m@s:1", "-redis", "redis://r"}, errHas: "both name a Redis"},
		{name: "two variables", env: map[string]string{"REDIS_CLUSTER": "a:1", "REDIS_SENTINEL": "m@s:1"}, errHas: "$REDIS_CLUSTER and $REDIS_SENTINEL"},
		{name: "bad url", args: []string{"-redis", "http://r:6379"}, errHas: "-redis: "},
		{name: "bad env url", env: map[string]string{"REDIS_URL": "::"}, errHas: "$REDIS_URL"},
		{name: "cluster without port", args: []string{"-redis-cluster", "a:1,b"}, errHas: `"b" is not host:port`},
		{name: "cluster empty element", args: []string{"-redis-cluster", "a:1,,b:2"}, errHas: `"" is not host:port`},
		{name: "sentinel without name", args: []string{"-redis-sentinel", "@s:1"}, errHas: "NAME@ADDR"},
		{name: "sentinel without @", args: []string{"-redis-sentinel", "s:1"}, errHas: "NAME@ADDR"},
		{name: "sentinel without address", args: []string{"-redis-sentinel", "m@"}, errHas: "is not host:port"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parse(t, tc.args, tc.env)
			if tc.errHas != "" {
				if !errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), tc.errHas) {
					t.Fatalf("Topology = %+v, %v; want a usage error with %q", got, err, tc.errHas)
				}
				return
			}
			if err != nil || got.Kind != tc.want.Kind || got.URL != tc.want.URL || got.Master != tc.want.Master ||
				!slices.Equal(got.Addrs, tc.want.Addrs) || got.From != tc.want.From {
				t.Fatalf("Topology = %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

// TestNewClient: each kind gets its go-redis client, tuned as package
// redisstore asks.
func TestNewClient(t *testing.T) {
	c, err := NewClient(Topology{Kind: Single, URL: "redis://:secret@127.0.0.1:1/3?dial_timeout=5s"}, 64)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	o := c.(*redis.Client).Options()
	if o.Addr != "127.0.0.1:1" || o.DB != 3 || !o.ContextTimeoutEnabled || o.DialTimeout != time.Second || o.DialerRetries != 1 || o.PoolSize != 64 {
		t.Fatalf("single: %+v", o)
	}
	cc, err := NewClient(Topology{Kind: Cluster, Addrs: []string{"127.0.0.1:1", "127.0.0.1:2"}}, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	co := cc.(*redis.ClusterClient).Options()
	if !slices.Equal(co.Addrs, []string{"127.0.0.1:1", "127.0.0.1:2"}) || !co.ContextTimeoutEnabled || co.DialTimeout != time.Second || co.DialerRetries != 1 {
		t.Fatalf("cluster: %+v", co)
	}
	fc, err := NewClient(Topology{Kind: Sentinel, Master: "m", Addrs: []string{"127.0.0.1:1"}}, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer fc.Close()
	fo := fc.(*redis.Client).Options()
	if !fo.ContextTimeoutEnabled || fo.DialTimeout != time.Second || fo.DialerRetries != 1 {
		t.Fatalf("sentinel: %+v", fo)
	}
	if c, err := NewClient(Topology{}, 0); c != nil || err != nil {
		t.Fatalf("none: %v, %v", c, err)
	}
	if s := (Topology{Kind: Single, URL: "redis://u:secret@h:1"}).String(); strings.Contains(s, "secret") {
		t.Fatalf("String shows the password: %s", s)
	}
}
