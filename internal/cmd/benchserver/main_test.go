package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
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
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			addr := l.Addr().String()
			l.Close()
			cmd := command("-addr "+addr+" -path /bench -tools 3 "+tc.args, tc.env...)
			var out strings.Builder
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			t.Cleanup(func() {
				cmd.Process.Kill()
				<-exited
			})
			ctx := context.Background()
			c := mcptest.Dial("http://" + addr + "/bench")
			defer c.Close()
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
				if _, err = c.Initialize(ctx); err == nil {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("initialize: %v\n%s", err, out.String())
				}
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
	} {
		out, err := command(tc.args, tc.env...).CombinedOutput()
		ee, ok := err.(*exec.ExitError)
		if !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), tc.want) {
			t.Errorf("benchserver %s %v: %v\n%s\nwant exit status 2 and %q", tc.args, tc.env, err, out, tc.want)
		}
	}
}
