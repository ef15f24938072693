package redisstore

import (
	"context"
	"testing"
	"time"

	"github.com/mcphandler/mcphandler/session/redisstore/redistest"
)

// BenchmarkGet measures Store.Get, the call every request of a session
// makes, and reports the Redis commands and round trips it costs.
func BenchmarkGet(b *testing.B) {
	ctx := context.Background()
	c := redistest.Client(b)
	st := newStoreOn(b, c, redistest.Prefix(b, c))
	s := sample("bench")
	s.Subscriptions = []string{"file:///project/README.md"}
	if err := st.Create(ctx, s); err != nil {
		b.Fatal(err)
	}
	if _, err := st.Get(ctx, "bench"); err != nil { // loads the script
		b.Fatal(err)
	}
	h := new(redistest.CountingHook)
	c.AddHook(h)

	report := func(b *testing.B) {
		n := h.Counts()
		b.ReportMetric(float64(n.Commands)/float64(b.N), "cmds/op")
		b.ReportMetric(float64(n.RoundTrips)/float64(b.N), "roundtrips/op")
	}
	b.Run("Serial", func(b *testing.B) {
		h.Reset()
		for b.Loop() {
			if _, err := st.Get(ctx, "bench"); err != nil {
				b.Fatal(err)
			}
		}
		report(b)
	})
	b.Run("Parallel", func(b *testing.B) {
		h.Reset()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := st.Get(ctx, "bench"); err != nil {
					b.Error(err)
					return
				}
			}
		})
		report(b)
	})
	// The floor: a bare GETEX of the same key, without the store.
	b.Run("BareGETEX", func(b *testing.B) {
		k := st.key("bench", kindSession)
		h.Reset()
		for b.Loop() {
			if err := c.GetEx(ctx, k, time.Minute).Err(); err != nil {
				b.Fatal(err)
			}
		}
		report(b)
	})
}
