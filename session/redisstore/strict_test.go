package redisstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mcphandler/mcphandler/session"
	"github.com/mcphandler/mcphandler/session/redisstore/redistest"
)

// TestStrictUnderLoad: while 32 goroutines read a session on replica b as
// fast as they can (with AutoPipeline their Gets share batches), a write
// on replica a is seen by every Get on b that starts after the write
// returned: the Update's new log level, then the Delete's not-found.
// Whatever batch a Get joins, and on whichever connection, nothing older
// than the last write that returned is ever served.
func TestStrictUnderLoad(t *testing.T) {
	for _, tc := range []struct {
		name       string
		ap, duplex bool
	}{{"Pool", false, false}, {"AutoPipeline", true, false}, {"AutoPipelineFullDuplex", true, true}} {
		t.Run(tc.name, func(t *testing.T) {
			optB := redistest.Options(t)
			if tc.duplex {
				optB.AutoPipelineOptions = &redis.AutoPipelineOptions{FullDuplex: true}
			}
			ca, cb := redistest.Client(t), redis.NewClient(optB)
			t.Cleanup(func() { cb.Close() })
			prefix := redistest.Prefix(t, ca)
			a := newStoreWith(t, ca, Options{Prefix: prefix, AutoPipeline: tc.ap})
			b := newStoreWith(t, cb, Options{Prefix: prefix, AutoPipeline: tc.ap})
			for round := range 20 {
				strictRound(t, a, b, fmt.Sprintf("s%d", round))
			}
		})
	}
}

// strictRound creates id on a, updates and deletes it there while b reads
// it from 32 goroutines, and fails the test if b serves anything older
// than the last write that returned before the Get started.
func strictRound(t *testing.T, a, b *Store, id string) {
	ctx := context.Background()
	s := sample(id)
	s.LogLevel = "info"
	if err := a.Create(ctx, s); err != nil {
		t.Fatal(err)
	}
	// 1: the Update returned; 2: the Delete was sent; 3: it returned.
	var phase atomic.Int64
	stop := make(chan struct{})
	var reads atomic.Int64
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				seen := phase.Load()
				got, err := b.Get(ctx, id)
				reads.Add(1)
				switch {
				case seen == 3 && !errors.Is(err, session.ErrNotFound):
					t.Errorf("%s: Get after the Delete returned = %+v, %v; want ErrNotFound", id, got, err)
					return
				case errors.Is(err, session.ErrNotFound) && phase.Load() < 2:
					t.Errorf("%s: Get = not found, before the Delete was sent", id)
					return
				case errors.Is(err, session.ErrNotFound):
				case err != nil:
					t.Errorf("%s: Get = %v", id, err)
					return
				case seen >= 1 && got.LogLevel != "debug":
					t.Errorf("%s: Get after the Update returned = %+v; want log level debug", id, got)
					return
				}
			}
		})
	}
	time.Sleep(5 * time.Millisecond)
	s.LogLevel = "debug"
	if err := a.Update(ctx, s); err != nil {
		t.Fatal(err)
	}
	phase.Store(1)
	time.Sleep(5 * time.Millisecond)
	phase.Store(2)
	if err := a.Delete(ctx, id); err != nil {
		t.Fatal(err)
	}
	phase.Store(3)
	time.Sleep(5 * time.Millisecond)
	close(stop)
	wg.Wait()
	if reads.Load() < 32 {
		t.Fatalf("%s: only %d reads", id, reads.Load())
	}
}
