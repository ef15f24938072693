package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mcphandler/mcphandler/mcptest"
	"github.com/mcphandler/mcphandler/session/redisstore/redistest"
)

func TestMain(m *testing.M) {
	if os.Getenv("BENCHSERVER_RUN_MAIN") == "1" {
		// The test binary plays the command.
		os.Args = append([]string{"benchserver"}, strings.Fields(os.Getenv("BENCHSERVER_ARGS"))...)
		main()
		return
	}
	os.Exit(redistest.Main(m).Run())
}

// command returns the test binary set up to run main with args, with no
// Redis in its environment but env.
func command(args string, env ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "BENCHSERVER_RUN_MAIN=1", "BENCHSERVER_ARGS="+args,
		"REDIS_URL=", "REDIS_CLUSTER=", "REDIS_SENTINEL=")
	cmd.Env = append(cmd.Env, env...)
	return cmd
}

// bench is a benchserver started by start.
type bench struct {
	url    string // its endpoint
	cmd    *exec.Cmd
	exited chan error // its Wait's error, once it exited
	out    *strings.Builder
}

// start runs benchserver with args on a free port at /bench, until the
// test ends, and waits until it listens.
func start(t *testing.T, args string, env ...string) *bench {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	b := &bench{url: "http://" + addr + "/bench", cmd: command("-addr "+addr+" -path /bench "+args, env...),
		exited: make(chan error, 1), out: new(strings.Builder)}
	b.cmd.Stdout, b.cmd.Stderr = b.out, b.out
	if err := b.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { b.exited <- b.cmd.Wait() }()
	t.Cleanup(func() {
		b.cmd.Process.Kill()
		err := <-b.exited
		b.exited <- err
	})
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			return b
		}
		if time.Now().After(deadline) {
			t.Fatalf("benchserver %s does not listen: %v\n%s", args, err, b.out.String())
		}
	}
}

// TestServes: benchserver serves its echo tool and its dummy tools with
// sessions in memory, on a single Redis, on a Redis Cluster and behind
// Sentinels, named by flags or by the environment, and stops on SIGTERM.
func TestServes(t *testing.T) {
	cl := redistest.SharedCluster(t)
	sn := redistest.SharedSentinel(t)
	single, _, _ := redistest.Start(t)
	for _, tc := range []struct {
		name, args string
		env        []string
		redis      func() redis.UniversalClient // where the session must be
	}{
		{"Memory", "", nil, nil},
		{"Single", "-redis redis://" + single, nil, func() redis.UniversalClient { return redistest.ClientAt(t, single) }},
		{"Cluster", "-redis-cluster " + strings.Join(cl.Addrs(), ","), nil, func() redis.UniversalClient { return cl.Client(t) }},
		{"Sentinel", "-redis-sentinel " + sn.MasterName() + "@" + strings.Join(sn.Addrs(), ","), nil, func() redis.UniversalClient { return sn.Client(t) }},
		{"ClusterFromEnv", "-cache 1s", []string{"REDIS_CLUSTER=" + strings.Join(cl.Addrs(), ",")}, func() redis.UniversalClient { return cl.Client(t) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := start(t, "-tools 3 "+tc.args, tc.env...)
			cmd, exited, out := b.cmd, b.exited, b.out
			ctx := context.Background()
			c := mcptest.Dial(b.url)
			defer c.Close()
			if _, err := c.Initialize(ctx); err != nil {
				t.Fatalf("initialize: %v\n%s", err, out.String())
			}
			tools, err := c.ListTools(ctx)
			if err != nil || len(tools) != 4 || tools[0].Name != "echo" {
				t.Fatalf("tools: %+v, %v", tools, err)
			}
			res, err := c.CallTool(ctx, "echo", map[string]any{"text": "hi"})
			if err != nil || res.IsError || res.Text() != "hi" {
				t.Fatalf("echo: %+v, %v", res, err)
			}
			if tc.redis != nil {
				prefix := fmt.Sprintf("mcph-bench-%d:", cmd.Process.Pid)
				if keys := redistest.Keys(t, tc.redis(), prefix); len(keys) == 0 {
					t.Fatalf("no key under %s: the session is not in that Redis", prefix)
				}
			}
			cmd.Process.Signal(syscall.SIGTERM)
			select {
			case err := <-exited:
				exited <- err
				if err != nil {
					t.Fatalf("after SIGTERM: %v\n%s", err, out.String())
				}
			case <-time.After(10 * time.Second):
				t.Fatal("benchserver did not stop on SIGTERM")
			}
		})
	}
}

// TestGateway: with -gateway, benchserver serves the tools of the
// upstreams named, under their own names, to clients of both eras: its
// echo is the upstream's (it fails once that upstream is gone), and a
// second upstream's prefixed tools sit beside the first's. With a Redis,
// the gateway keeps its lists there.
func TestGateway(t *testing.T) {
	single, _, _ := redistest.Start(t)
	for _, tc := range []struct{ name, args string }{{"Memory", ""}, {"Redis", "-redis redis://" + single + " -autopipeline"}} {
		t.Run(tc.name, func(t *testing.T) {
			a := start(t, "-tools 2")
			b := start(t, "-tools 1 -tool-prefix b_ -list-ttl 1m")
			gw := start(t, "-gateway "+a.url+","+b.url+" "+tc.args)
			ctx := context.Background()
			old := mcptest.Dial(gw.url)
			if _, err := old.Initialize(ctx); err != nil {
				t.Fatalf("initialize: %v\n%s", err, gw.out.String())
			}
			for _, c := range []*mcptest.Client{old, mcptest.DialModern(gw.url)} {
				defer c.Close()
				tools, err := c.ListTools(ctx)
				var names []string
				for _, tl := range tools {
					names = append(names, tl.Name)
				}
				if want := "echo tool_0000 tool_0001 b_echo b_tool_0000"; err != nil || strings.Join(names, " ") != want {
					t.Fatalf("tools: %v, %v; want %s\n%s", names, err, want, gw.out.String())
				}
				for _, name := range []string{"echo", "b_echo"} {
					res, err := c.CallTool(ctx, name, map[string]any{"text": "hi"})
					if err != nil || res.IsError || res.Text() != "hi" {
						t.Fatalf("%s: %+v, %v\n%s", name, res, err, gw.out.String())
					}
				}
			}
			if tc.args != "" {
				prefix := fmt.Sprintf("mcph-bench-%d:", gw.cmd.Process.Pid)
				keys := redistest.Keys(t, redistest.ClientAt(t, single), prefix)
				if !slices.ContainsFunc(keys, func(k string) bool { return strings.Contains(k, "gw-list/") }) {
					t.Fatalf("no list under %s (%v): the gateway's lists are not in that Redis", prefix, keys)
				}
			}
			a.cmd.Process.Kill()
			c := mcptest.DialModern(gw.url)
			defer c.Close()
			if res, err := c.CallTool(ctx, "echo", map[string]any{"text": "hi"}); err == nil && !res.IsError {
				t.Fatalf("echo answered with its upstream gone: %+v", res)
			}
		})
	}
}

// TestUsageErrors: two Redis deployments at once, or a malformed one, is a
// usage error: exit status 2, before anything is served.
func TestUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args string
		env  []string
		want string
	}{
		{"-redis redis://127.0.0.1:1 -redis-sentinel m@127.0.0.1:1", nil, "-redis and -redis-sentinel"},
		{"", []string{"REDIS_URL=redis://127.0.0.1:1", "REDIS_CLUSTER=127.0.0.1:1"}, "$REDIS_URL and $REDIS_CLUSTER"},
		{"-redis-cluster 127.0.0.1", nil, "is not host:port"},
		{"-gateway http://127.0.0.1:1/mcp -tools 3", nil, "-gateway serves the upstreams' tools only"},
	} {
		out, err := command(tc.args, tc.env...).CombinedOutput()
		ee, ok := err.(*exec.ExitError)
		if !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), tc.want) {
			t.Errorf("benchserver %s %v: %v\n%s\nwant exit status 2 and %q", tc.args, tc.env, err, out, tc.want)
		}
	}
}
