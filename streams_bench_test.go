package mcphandler_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/session/redisstore"
	"github.com/mcphandler/mcphandler/session/redisstore/redistest"
)

// Sizes of BenchmarkScaleRedis.
const (
	scaleSessions = 10000
	scaleStreams  = 2000
	scaleTenants  = 20 // streams are spread evenly: 100 per tenant
)

// BenchmarkScaleRedis holds 10,000 sessions and 2,000 open GET streams on
// one replica (B) with the Redis store, and reports:
//
// heap-B/stream, stack-B/stream and rss-B/stream are what opening the
// 2,000 streams added to this process (runtime.MemStats HeapInuse and
// StackInuse after a GC, and VmRSS), divided by the streams. The clients
// are raw TCP connections in the same process, with a 512-byte read
// buffer each and no goroutine, so about 1 KB per stream of these figures
// is the client's.
//
// goroutines/stream is the goroutines the streams added, all of them the
// server's (the clients have none while idle).
//
// p50-ms and p99-ms: each iteration notifies one tenant's sessions
// (NotifyToolsChanged) on another replica (A), and times the arrival of
// notifications/tools/list_changed on each of that tenant's 100 streams
// held by B.
//
//	go test -run XXX -bench ScaleRedis -benchtime 50x .
func BenchmarkScaleRedis(b *testing.B) {
	ctx := context.Background()
	prefix := redistest.Prefix(b, redistest.Client(b))
	a, srvB := scaleReplica(b, prefix), scaleReplica(b, prefix)
	srv := httptest.NewServer(srvB)
	b.Cleanup(srv.Close)

	ids := scaleSessionsOpen(b, srv.URL)
	runtime.GC()
	before, g0, rss0 := memNow(), runtime.NumGoroutine(), rssBytes()
	streams := make([]*scaleStream, scaleStreams)
	for i := range streams {
		streams[i] = openScaleStream(b, srv.Listener.Addr().String(), ids[i], i)
	}
	b.Cleanup(func() {
		for _, s := range streams {
			s.c.Close()
		}
	})
	time.Sleep(200 * time.Millisecond) // let every stream settle
	runtime.GC()
	after, g1, rss1 := memNow(), runtime.NumGoroutine(), rssBytes()

	var lat []time.Duration
	tenant := 0
	for b.Loop() {
		lat = append(lat, notifyTenant(b, ctx, a, streams, tenant)...)
		tenant = (tenant + 1) % scaleTenants
	}
	// After the loop: b.Loop's first call clears the metrics reported so far.
	b.ReportMetric(float64(int64(after.HeapInuse)-int64(before.HeapInuse))/scaleStreams, "heap-B/stream")
	b.ReportMetric(float64(int64(after.StackInuse)-int64(before.StackInuse))/scaleStreams, "stack-B/stream")
	b.ReportMetric(float64(rss1-rss0)/scaleStreams, "rss-B/stream")
	b.ReportMetric(float64(g1-g0)/scaleStreams, "goroutines/stream")
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2])/1e6, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100])/1e6, "p99-ms")
}

// scaleReplica returns a handler on its own Redis client and store, with
// one identity per token "u<n>" in tenant "t<n mod scaleTenants>".
func scaleReplica(b *testing.B, prefix string) *mcphandler.Handler {
	st := redisstore.New(redistest.Client(b), redisstore.Options{Prefix: prefix})
	b.Cleanup(func() { st.Close() })
	h := mcphandler.New(mcphandler.Config{
		Name: "scale",
		Authenticate: func(r *http.Request) (mcphandler.Identity, error) {
			tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer u")
			n, err := strconv.Atoi(tok)
			if err != nil {
				return mcphandler.Identity{}, errors.New("bad token")
			}
			return mcphandler.Identity{Tenant: "t" + strconv.Itoa(n%scaleTenants), Subject: "u" + tok}, nil
		},
		ListTools: func(context.Context) ([]mcphandler.Tool, error) { return nil, nil },
		Store:     st,
		StateKeys: [][]byte{[]byte("0123456789abcdef0123456789abcdef")},
		Logger:    slog.New(slog.DiscardHandler),
	})
	b.Cleanup(func() { h.Close() })
	return h
}

// scaleSessionsOpen initializes scaleSessions sessions (initialize, then
// notifications/initialized), session i with token "u<i>", 32 at a time,
// and returns their ids.
func scaleSessionsOpen(b *testing.B, url string) []string {
	ids := make([]string, scaleSessions)
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 32}}
	b.Cleanup(hc.CloseIdleConnections)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	for w := range 32 {
		wg.Go(func() {
			for i := w; i < scaleSessions; i += 32 {
				id, err := handshake(hc, url, i)
				if err != nil {
					mu.Lock()
					first = firstErr(first, err)
					mu.Unlock()
					return
				}
				ids[i] = id
			}
		})
	}
	wg.Wait()
	if first != nil {
		b.Fatal(first)
	}
	return ids
}

func firstErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

func handshake(hc *http.Client, url string, i int) (string, error) {
	post := func(id, body string) (*http.Response, error) {
		req, _ := http.NewRequest("POST", url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer u"+strconv.Itoa(i))
		if id != "" {
			req.Header.Set("Mcp-Session-Id", id)
			req.Header.Set("MCP-Protocol-Version", "2025-06-18")
		}
		resp, err := hc.Do(req)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		return resp, err
	}
	resp, err := post("", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"scale","version":"1"}}}`)
	if err != nil {
		return "", err
	}
	id := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != 200 || id == "" {
		return "", fmt.Errorf("initialize %d: status %d, session %q", i, resp.StatusCode, id)
	}
	if resp, err = post(id, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); err != nil {
		return "", err
	}
	if resp.StatusCode != 202 {
		return "", fmt.Errorf("initialized %d: status %d", i, resp.StatusCode)
	}
	return id, nil
}

// scaleStream is one open GET stream: a raw connection, read only while a
// notification is timed.
type scaleStream struct {
	c      net.Conn
	r      *bufio.Reader
	tenant int
}

func openScaleStream(b *testing.B, addr, id string, i int) *scaleStream {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		b.Fatal(err)
	}
	fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: %s\r\nAccept: text/event-stream\r\nAuthorization: Bearer u%d\r\n"+
		"Mcp-Session-Id: %s\r\nMCP-Protocol-Version: 2025-06-18\r\n\r\n", addr, i, id)
	s := &scaleStream{c: c, r: bufio.NewReaderSize(c, 512), tenant: i % scaleTenants}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	status, err := s.r.ReadString('\n')
	if err != nil || !strings.Contains(status, " 200 ") {
		b.Fatalf("GET stream %d: %q %v", i, status, err)
	}
	return s
}

// notifyTenant notifies tenant's sessions on replica a and returns how long
// the notification took to reach each of the tenant's streams.
func notifyTenant(b *testing.B, ctx context.Context, a *mcphandler.Handler, streams []*scaleStream, tenant int) []time.Duration {
	var wg sync.WaitGroup
	var mu sync.Mutex
	var lat []time.Duration
	var start time.Time
	ready := make(chan struct{})
	for _, s := range streams {
		if s.tenant != tenant {
			continue
		}
		wg.Go(func() {
			s.c.SetReadDeadline(time.Now().Add(5 * time.Second))
			<-ready
			for {
				line, err := s.r.ReadSlice('\n')
				if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
					b.Errorf("stream of tenant %d: %v", tenant, err)
					return
				}
				if bytes.Contains(line, []byte("notifications/tools/list_changed")) {
					d := time.Since(start)
					mu.Lock()
					lat = append(lat, d)
					mu.Unlock()
					return
				}
			}
		})
	}
	start = time.Now()
	close(ready)
	if err := a.NotifyToolsChanged(ctx, mcphandler.TenantOf("t"+strconv.Itoa(tenant))); err != nil {
		b.Fatal(err)
	}
	wg.Wait()
	return lat
}

func memNow() runtime.MemStats {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m
}

// rssBytes returns this process's resident set size (VmRSS).
func rssBytes() int64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for l := range strings.SplitSeq(string(data), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}
