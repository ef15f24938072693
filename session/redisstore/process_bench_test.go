package redisstore

import (
	"context"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mcphandler/mcphandler/session/redisstore/redistest"
)

// BenchmarkGetConcurrent measures Store.Get one call at a time (Serial) and
// from 32 goroutines at once (Concurrent), as a loaded replica issues it:
// through the client's pool (Pool), through go-redis's autopipeliner with
// its defaults (AutoPipeline), and with its full-duplex engine
// (AutoPipelineFullDuplex). It reports the CPU time this process and the
// Redis server spend per call.
//
//	go test -run XXX -bench GetConcurrent ./session/redisstore
func BenchmarkGetConcurrent(b *testing.B) {
	ctx := context.Background()
	for _, mode := range []string{"Pool", "AutoPipeline", "AutoPipelineFullDuplex"} {
		for _, par := range []int{1, 32} {
			name := mode + "/Serial"
			if par > 1 {
				name = mode + "/Concurrent"
			}
			b.Run(name, func(b *testing.B) {
				opt := redistest.Options(b)
				if mode == "AutoPipelineFullDuplex" {
					opt.AutoPipelineOptions = &redis.AutoPipelineOptions{FullDuplex: true}
				}
				c := redis.NewClient(opt)
				b.Cleanup(func() { c.Close() })
				st := New(c, Options{Prefix: redistest.Prefix(b, c), AutoPipeline: mode != "Pool"})
				b.Cleanup(func() { st.Close() })
				if err := st.Create(ctx, sample("bench")); err != nil {
					b.Fatal(err)
				}
				st.Get(ctx, "bench")
				cpu0, rcpu0 := selfCPU(), redisCPU(b, c)
				b.ResetTimer()
				if par == 1 {
					for range b.N {
						if _, err := st.Get(ctx, "bench"); err != nil {
							b.Fatal(err)
						}
					}
				} else {
					b.SetParallelism(max(1, par/runtime.GOMAXPROCS(0)))
					b.RunParallel(func(pb *testing.PB) {
						for pb.Next() {
							if _, err := st.Get(ctx, "bench"); err != nil {
								b.Error(err)
								return
							}
						}
					})
				}
				b.StopTimer()
				b.ReportMetric(float64((selfCPU()-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
				b.ReportMetric(float64((redisCPU(b, c)-rcpu0).Microseconds())/float64(b.N), "redis-cpu-µs/op")
			})
		}
	}
}

// selfCPU returns the user and system CPU time of this process.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// redisCPU returns the CPU time the Redis server of c used so far, as
// INFO reports it (used_cpu_sys + used_cpu_user).
func redisCPU(b *testing.B, c redis.UniversalClient) time.Duration {
	info, err := c.Info(context.Background(), "cpu").Result()
	if err != nil {
		b.Fatal(err)
	}
	var total float64
	for l := range strings.SplitSeq(info, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(l), ":")
		if ok && (k == "used_cpu_sys" || k == "used_cpu_user") {
			f, _ := strconv.ParseFloat(v, 64)
			total += f
		}
	}
	return time.Duration(total * float64(time.Second))
}
