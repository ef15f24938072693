package redisstore

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

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

// BenchmarkTopology measures a read (Get) and a decisive write
// (CompareAndSwap, as a confirm's answer is claimed) on a single server,
// on the shared Redis Cluster and behind the shared Sentinels, without and
// with WaitReplicas: 1 (the write then waits for a replica's
// acknowledgement, in the same round trip).
//
//	go test -run XXX -bench Topology -benchtime 2000x ./session/redisstore
func BenchmarkTopology(b *testing.B) {
	ctx := context.Background()
	master, _, _ := redistest.Start(b)
	redistest.StartReplica(b, master)
	clients := []struct {
		name string
		c    func() redis.UniversalClient
	}{
		{"Single", func() redis.UniversalClient { return redistest.ClientAt(b, master) }},
		{"Cluster", func() redis.UniversalClient { return redistest.SharedCluster(b).Client(b) }},
		{"Sentinel", func() redis.UniversalClient { return redistest.SharedSentinel(b).Client(b) }},
	}
	for _, tc := range clients {
		for _, wait := range []int{0, 1} {
			b.Run(fmt.Sprintf("%s/WaitReplicas=%d", tc.name, wait), func(b *testing.B) {
				c := tc.c()
				st := New(c, Options{Prefix: redistest.Prefix(b, c), WaitReplicas: wait})
				b.Cleanup(func() { st.Close() })
				if err := st.Create(ctx, sample("s")); err != nil {
					b.Fatal(err)
				}
				st.PutIfAbsent(ctx, "r", []byte("0"), time.Minute)
				st.Get(ctx, "s")
				st.CompareAndSwap(ctx, "r", []byte("0"), []byte("0"), time.Minute)
				b.Run("Get", func(b *testing.B) {
					for b.Loop() {
						if _, err := st.Get(ctx, "s"); err != nil {
							b.Fatal(err)
						}
					}
				})
				b.Run("CompareAndSwap", func(b *testing.B) {
					v := []byte("0")
					for b.Loop() {
						if ok, err := st.CompareAndSwap(ctx, "r", v, v, time.Minute); err != nil || !ok {
							b.Fatal(ok, err)
						}
					}
				})
			})
		}
	}
}

// BenchmarkAppendEvent measures Store.AppendEvent, a MULTI RPUSH PEXPIRE
// EXEC transaction, against appendScript, the Lua script that appends the
// same way and also replaces a key of another type, which AppendEvent
// runs only when the transaction found one. It runs on a private Redis
// and reports, besides the latency, the CPU time Redis spent per append
// (redis-µs/op): the script's is about a fifth higher, which is why
// AppendEvent does not run it every time.
func BenchmarkAppendEvent(b *testing.B) {
	ctx := context.Background()
	addr, _, _ := redistest.Start(b)
	c := redistest.ClientAt(b, addr)
	st := newStoreOn(b, c, redistest.Prefix(b, c))
	data := make([]byte, 200)
	redisCPU := func() float64 {
		info := c.Info(ctx, "cpu").Val()
		var total float64
		for _, field := range []string{"used_cpu_sys:", "used_cpu_user:"} {
			var v float64
			if i := strings.Index(info, field); i >= 0 {
				fmt.Sscan(info[i+len(field):], &v)
			}
			total += v
		}
		return total
	}
	run := func(b *testing.B, appendOne func(stream string) error) {
		if err := appendOne("warm"); err != nil { // loads the script
			b.Fatal(err)
		}
		n := 0
		cpu := redisCPU()
		for b.Loop() {
			// A new log every 1000 events keeps the lists short.
			if err := appendOne(fmt.Sprint(n / 1000)); err != nil {
				b.Fatal(err)
			}
			n++
		}
		b.ReportMetric((redisCPU()-cpu)*1e6/float64(b.N), "redis-µs/op")
	}
	b.Run("Store", func(b *testing.B) {
		run(b, func(stream string) error {
			_, err := st.AppendEvent(ctx, "store/"+stream, data, time.Minute)
			return err
		})
	})
	b.Run("Script", func(b *testing.B) {
		run(b, func(stream string) error {
			_, err := st.runScript(ctx, appendScript, st.key("script/"+stream, kindLog), data, time.Minute.Milliseconds())
			return err
		})
	})
}
