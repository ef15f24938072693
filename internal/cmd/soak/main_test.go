package main

import (
	"bytes"
	"context"
	"encoding/csv"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/mcphandler/mcphandler/session/redisstore/redistest"
)

func TestMain(m *testing.M) { os.Exit(redistest.Main(m).Run()) }

// TestRoute: answers, tasks requests, DELETEs and (for 2024-11-05) every
// POST go to the other replica; the rest stays home, bodies intact.
func TestRoute(t *testing.T) {
	var got [2]atomic.Value
	servers := [2]*httptest.Server{}
	for i := range servers {
		servers[i] = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			got[i].Store(r.Method + " " + string(b))
		}))
		defer servers[i].Close()
	}
	host := func(s *httptest.Server) string { return strings.TrimPrefix(s.URL, "http://") }
	for _, tc := range []struct {
		name    string
		toOther func(*http.Request, []byte) bool
		method  string
		body    string
		other   bool
	}{
		{"answer", answers, "POST", `{"jsonrpc":"2.0","id":"q1","result":{"action":"accept"}}`, true},
		{"error answer", answers, "POST", `{"jsonrpc":"2.0","id":"q1","error":{"code":-1,"message":"no"}}`, true},
		{"request", answers, "POST", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{}}`, false},
		{"GET", answers, "GET", ``, false},
		{"tasks/result", anyOf(taskRequests, deletes), "POST", `{"jsonrpc":"2.0","id":2,"method":"tasks/result","params":{}}`, true},
		{"tools/call", anyOf(taskRequests, deletes), "POST", `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{}}`, false},
		{"DELETE", anyOf(taskRequests, deletes), "DELETE", ``, true},
		{"message", posts, "POST", `{"jsonrpc":"2.0","id":3,"method":"ping"}`, true},
		{"stream", posts, "GET", ``, false},
	} {
		var sent atomic.Int64
		rt := &route{base: http.DefaultTransport, home: host(servers[0]), other: host(servers[1]), toOther: tc.toOther, sent: &sent}
		req, _ := http.NewRequest(tc.method, servers[0].URL+"/mcp", strings.NewReader(tc.body))
		if tc.body == "" {
			req.Body = nil
		}
		got[0].Store("")
		got[1].Store("")
		resp, err := rt.client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		at := 0
		if tc.other {
			at = 1
		}
		if got[at].Load() != tc.method+" "+tc.body || got[1-at].Load() != "" || sent.Load() != 1 {
			t.Errorf("%s: home got %q, other %q (sent %d); want it on the %v replica", tc.name, got[0].Load(), got[1].Load(), sent.Load(), map[bool]string{false: "home", true: "other"}[tc.other])
		}
	}
}

// TestInterleave: each kind comes as often as its weight in a cycle, and
// no kind twice in a row when another could come between.
func TestInterleave(t *testing.T) {
	w, _ := weights("")
	s := interleave(w)
	n := make([]int, len(kinds))
	for _, k := range s {
		n[k]++
	}
	total := 0
	for i, k := range kinds {
		total += k.weight
		if n[i] != k.weight {
			t.Errorf("%s: %d in a cycle, weight %d", k.name, n[i], k.weight)
		}
	}
	if len(s) != total {
		t.Fatalf("cycle of %d, weights sum to %d", len(s), total)
	}
	for i := 1; i < len(s); i++ {
		if s[i] == s[i-1] {
			t.Errorf("%s twice in a row at %d", kinds[s[i]].name, i)
		}
	}
}

func TestWeights(t *testing.T) {
	w, err := weights("task-26,listen-26")
	if err != nil {
		t.Fatal(err)
	}
	s := interleave(w)
	if len(s) != 2 || kinds[s[0]].name != "task-26" || kinds[s[1]].name != "listen-26" {
		t.Fatalf("schedule %v", s)
	}
	if _, err := weights("task-26,nothing"); err == nil {
		t.Fatal("an unknown kind was taken")
	}
}

// TestJudge: each figure within its tolerance passes, past it fails;
// shrinking always passes.
func TestJudge(t *testing.T) {
	ref := figures{Keys: 1000, Memory: 4 << 20, RSS: [2]int64{40 << 20, 40 << 20}, Goroutines: [2]int64{100, 1000}, FDs: [2]int64{20, 20}}
	flat := ref
	for _, v := range judge(ref, flat) {
		if !v.ok {
			t.Errorf("flat: %s", v)
		}
	}
	for _, tc := range []struct {
		name  string
		grow  func(*figures)
		fails string
	}{
		{"keys +100 of 1000", func(f *figures) { f.Keys += 100 }, ""},
		{"keys +101 of 1000", func(f *figures) { f.Keys += 101 }, "Redis keys"},
		{"goroutines +50 of 100", func(f *figures) { f.Goroutines[0] += 50 }, ""},
		{"goroutines +51 of 100", func(f *figures) { f.Goroutines[0] += 51 }, "goroutines A"},
		{"goroutines +101 of 1000", func(f *figures) { f.Goroutines[1] += 101 }, "goroutines B"},
		{"RSS +20%", func(f *figures) { f.RSS[1] += 8 << 20 }, ""},
		{"RSS past 20%", func(f *figures) { f.RSS[1] += 8<<20 + 1 }, "RSS B"},
		{"fds +10", func(f *figures) { f.FDs[0] += 10 }, ""},
		{"fds +11", func(f *figures) { f.FDs[0] += 11 }, "open fds A"},
		{"memory +2 MiB of 4", func(f *figures) { f.Memory += 2 << 20 }, ""},
		{"memory past 2 MiB of 4", func(f *figures) { f.Memory += 2<<20 + 1 }, "Redis used_memory"},
		{"everything shrinks", func(f *figures) { *f = figures{} }, ""},
	} {
		last := ref
		tc.grow(&last)
		var failed []string
		for _, v := range judge(ref, last) {
			if !v.ok {
				failed = append(failed, v.tol.name)
			}
		}
		if strings.Join(failed, ",") != tc.fails {
			t.Errorf("%s: failed %v, want %q", tc.name, failed, tc.fails)
		}
	}
}

func TestMedian(t *testing.T) {
	fs := []figures{{Keys: 5, FDs: [2]int64{1, 9}}, {Keys: 1, FDs: [2]int64{3, 7}}, {Keys: 9, FDs: [2]int64{2, 8}}, {Keys: 3, FDs: [2]int64{4, 6}}}
	m := median(fs)
	if m.Keys != 3 || m.FDs != [2]int64{2, 7} {
		t.Fatalf("median %+v", m)
	}
	if median(nil) != (figures{}) {
		t.Fatal("median of nothing")
	}
}

// TestTable: the header and every row line up, and the CSV has a value
// per column.
func TestTable(t *testing.T) {
	r := row{Minute: 12, Fig: figures{Keys: 123456, Memory: 3 << 20, RSS: [2]int64{99 << 20, 1 << 30}, Goroutines: [2]int64{12345, 7}, FDs: [2]int64{1234, 5}},
		Kinds: []counts{{100000, 2, 3}}, Skipped: 9, HTTP: 999999}
	if h, l := tableHeader(), tableRow(r); len(h) != len(l) {
		t.Fatalf("header and row differ in width:\n%s\n%s", h, l)
	}
	if len(csvRecord(r)) != len(csvHeader()) {
		t.Fatalf("%d values, %d columns", len(csvRecord(r)), len(csvHeader()))
	}
}

func TestInfoField(t *testing.T) {
	info := "# Memory\r\nused_memory:1234567\r\nused_memory_human:1.18M\r\n"
	if v, err := infoField(info, "used_memory"); err != nil || v != 1234567 {
		t.Fatalf("%d, %v", v, err)
	}
	if _, err := infoField(info, "nothing"); err == nil {
		t.Fatal("a missing field was found")
	}
	if rss, err := vmRSS(os.Getpid()); err != nil || rss <= 0 {
		t.Fatalf("VmRSS of the test: %d, %v", rss, err)
	}
	if n, err := openFDs(os.Getpid()); err != nil || n < 3 {
		t.Fatalf("fds of the test: %d, %v", n, err)
	}
}

// TestSoak runs every kind of operation against two soakserver processes
// on a Redis of the test's own, for three short minutes: every kind
// succeeds (or fails as meant to), none fails unexpectedly, and the table
// and the CSV have a row per minute. (The figures are not judged: minutes
// this short end before the records the load makes expire.)
func TestSoak(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs two servers")
	}
	dir := t.TempDir()
	gobin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if out, err := exec.Command(gobin, "build", "-o", dir, "../soakserver").CombinedOutput(); err != nil {
		t.Fatalf("go build soakserver: %v\n%s", err, out)
	}
	addr, _, _ := redistest.Start(t)
	key := "0123456789abcdef0123456789abcdef"
	var endpoints [2][2]string // per replica: MCP, debug
	for i := range 2 {
		files := [2]string{filepath.Join(dir, "addr"+string(rune('a'+i))), filepath.Join(dir, "debug"+string(rune('a'+i)))}
		cmd := exec.Command(filepath.Join(dir, "soakserver"), "-redis", "redis://"+addr, "-addr-file", files[0], "-debug-addr-file", files[1])
		cmd.Env = append(os.Environ(), "MCP_STATE_KEY="+key)
		var log bytes.Buffer
		cmd.Stderr = &log
		if runtime.GOOS == "linux" {
			cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			cmd.Process.Signal(syscall.SIGTERM)
			cmd.Wait()
			if t.Failed() {
				t.Logf("replica %d:\n%s", i, log.String())
			}
		})
		for j, f := range files {
			for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
				b, err := os.ReadFile(f)
				if err == nil && len(b) > 0 {
					endpoints[i][j] = strings.TrimSpace(string(b))
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("replica %d wrote no %s: %s", i, f, log.String())
				}
			}
		}
	}
	cfg := config{a: endpoints[0][0], b: endpoints[1][0], debugA: endpoints[0][1], debugB: endpoints[1][1],
		redisURL: "redis://" + addr, prefix: "mcph-soak:", stateKey: key, minutes: 3, warmup: 1, workers: 8, rate: 15,
		minute: 3 * time.Second, sampleEvery: 500 * time.Millisecond, opTimeout: 20 * time.Second, csvPath: filepath.Join(dir, "soak.csv")}
	if err := cfg.check(); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	r, err := soak(context.Background(), cfg, &out, &errOut)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s%s", out.String(), errOut.String())
	for i, k := range kinds {
		c := r.kinds[i]
		if c.Unexpected > 0 || c.OK == 0 && c.Expected == 0 {
			t.Errorf("%s: %+v", k.name, c)
		}
	}
	if len(r.rows) != 4 || r.rows[3].Fig.Keys == 0 || r.rows[3].Fig.Goroutines[1] == 0 || r.rows[3].Fig.RSS[0] == 0 || r.rows[3].Fig.FDs[1] == 0 {
		t.Fatalf("rows: %+v", r.rows)
	}
	f, err := os.Open(cfg.csvPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil || len(recs) != 5 {
		t.Fatalf("CSV: %d records, %v", len(recs), err)
	}
}
