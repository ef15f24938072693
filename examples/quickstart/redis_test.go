package main

import (
	"context"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/mcphandler/mcphandler/session/redisstore/redistest"
)

func TestMain(m *testing.M) {
	if os.Getenv("QUICKSTART_RUN_MAIN") == "1" {
		// The test binary plays the command: see TestUsageErrors.
		os.Args = append([]string{"quickstart"}, strings.Fields(os.Getenv("QUICKSTART_ARGS"))...)
		main()
		return
	}
	os.Exit(redistest.Main(m).Run())
}

// TestSeeding: on a single Redis and on a Redis Cluster (where one
// transaction across both tenants' keys is refused, CROSSSLOT), the first
// process to start seeds each tenant's documents; a later start brings no
// deleted document back; and a start that died after seeding one tenant
// leaves the next start to seed the other.
func TestSeeding(t *testing.T) {
	for name, clients := range map[string]func(t *testing.T) redis.UniversalClient{
		"Single":  func(t *testing.T) redis.UniversalClient { return redistest.Client(t) },
		"Cluster": func(t *testing.T) redis.UniversalClient { return redistest.SharedCluster(t).Client(t) },
	} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			c := clients(t)
			prefix := redistest.Prefix(t, c)
			d, err := newRedisDocs(ctx, c, prefix)
			if err != nil {
				t.Fatalf("first start: %v", err)
			}
			for tenant, want := range map[string]int{"acme": 3, "globex": 2} {
				if docs, err := d.list(ctx, tenant); err != nil || len(docs) != want {
					t.Fatalf("%s after the first start: %+v, %v", tenant, docs, err)
				}
			}
			if ok, err := d.remove(ctx, "acme", "a2"); err != nil || !ok {
				t.Fatalf("remove: %v, %v", ok, err)
			}
			if _, err := newRedisDocs(ctx, clients(t), prefix); err != nil {
				t.Fatalf("second start: %v", err)
			}
			if docs, _ := d.list(ctx, "acme"); len(docs) != 2 || slices.Contains(docs, doc{"a2", "Incident 42 postmortem"}) {
				t.Fatalf("a second start brought a deleted document back: %+v", docs)
			}
			if _, ok, _ := d.body(ctx, "acme", "a2"); ok {
				t.Fatal("the deleted document's body is back")
			}

			// A start that died after seeding acme only.
			prefix2 := redistest.Prefix(t, c)
			half := &redisDocs{c: c, prefix: prefix2}
			keys := []string{half.tenantKey("acme", "titles"), half.tenantKey("acme", "bodies"), half.tenantKey("acme", "seeded")}
			if err := seedScript.Run(ctx, c, keys, "a1", "Q3 roadmap", "body").Err(); err != nil {
				t.Fatal(err)
			}
			if _, err := newRedisDocs(ctx, c, prefix2); err != nil {
				t.Fatal(err)
			}
			if docs, _ := half.list(ctx, "globex"); len(docs) != 2 {
				t.Fatalf("globex after an interrupted seeding: %+v", docs)
			}
			if docs, _ := half.list(ctx, "acme"); len(docs) != 1 {
				t.Fatalf("acme was seeded twice: %+v", docs)
			}
		})
	}
}

// TestUsageErrors: naming two Redis deployments, by flags or by
// environment variables, or a malformed one, is a usage error: exit
// status 2 and a message naming the culprits, before anything is served.
func TestUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args, env, want string
	}{
		{"-redis redis://127.0.0.1:1 -redis-cluster 127.0.0.1:1", "", "-redis and -redis-cluster"},
		{"-redis-cluster 127.0.0.1:1 -redis-sentinel m@127.0.0.1:1", "", "-redis-cluster and -redis-sentinel"},
		{"", "REDIS_URL=redis://127.0.0.1:1 REDIS_SENTINEL=m@127.0.0.1:1", "$REDIS_URL and $REDIS_SENTINEL"},
		{"-redis-sentinel 127.0.0.1:1", "", "NAME@ADDR"},
		{"-redis-cluster nope", "", "is not host:port"},
		{"-redis ftp://x", "", "-redis:"},
	} {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "QUICKSTART_RUN_MAIN=1", "QUICKSTART_ARGS="+tc.args,
			"REDIS_URL=", "REDIS_CLUSTER=", "REDIS_SENTINEL=")
		cmd.Env = append(cmd.Env, strings.Fields(tc.env)...)
		out, err := cmd.CombinedOutput()
		ee, ok := err.(*exec.ExitError)
		if !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), tc.want) {
			t.Errorf("quickstart %s (env %s): %v\n%s\nwant exit status 2 and %q", tc.args, tc.env, err, out, tc.want)
		}
	}
}
