package mcphandler_test

import (
	"context"
	"testing"
	"time"

	"github.com/mcphandler/mcphandler/mcptest"
	"github.com/mcphandler/mcphandler/session/redisstore"
)

// TestReplicasAutoPipeline: three replicas whose stores send their
// commands through go-redis's autopipeliner serve one conversation as the
// default stores do, a confirm asked by one and answered through another
// included, and a DELETE on one replica is 404 on every replica at once.
func TestReplicasAutoPipeline(t *testing.T) {
	f := &fixture{}
	cl := newClusterWith(t, 3, f.config(), redisClient(t),
		redisstore.Options{OpTimeout: 500 * time.Millisecond, AutoPipeline: true})
	ctx := context.Background()
	c := mcptest.Dial(cl.proxy.URL, mcptest.WithToken("acme-admin"),
		mcptest.WithElicitationHandler(answer("accept", map[string]any{"confirm": true})))
	defer c.Close()
	if _, err := c.Initialize(ctx); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := c.Ping(ctx); err != nil {
			t.Fatal(err)
		}
	}
	res, err := c.CallTool(ctx, "delete_thing", nil)
	if err != nil || res.IsError || f.count("delete_thing") != 1 {
		t.Fatalf("confirm across replicas: %+v, %v (ran %d)", res, err, f.count("delete_thing"))
	}
	if err := c.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := c.Ping(ctx); !isHTTP(err, 404) {
			t.Fatalf("after DELETE: %v, want 404 on every replica", err)
		}
	}
	for i := range cl.served {
		if cl.served[i].Load() == 0 {
			t.Fatalf("replica %d served nothing: the test did not alternate", i)
		}
	}
}
