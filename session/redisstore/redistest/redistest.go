// Package redistest gives tests a Redis to talk to, the way net/http/httptest
// gives them a server.
//
// [Client] finds one in this order:
//
//  1. the URL in the environment variable REDIS_URL
//     (redis://[user:password@]host:port[/db], rediss://..., unix://...);
//     the test fails if it is set but unreachable;
//  2. a Redis answering PING on 127.0.0.1:6379;
//  3. a private redis-server started from PATH on a free port, without
//     persistence, and killed when the test ends.
//
// When none of these works the test fails (it is never skipped) with a
// message saying how to provide a Redis. [Start] always starts a private
// server, for tests that stop and restart Redis, and [StartReplica] a
// replica of one.
//
// [StartCluster] starts a Redis Cluster and [StartSentinel] a master, its
// replica and three Sentinels, of private redis-server processes, with
// clients ([Cluster.Client], [Sentinel.Client]) and failovers on demand
// ([Cluster.Failover], [Cluster.KillMaster], [Sentinel.Failover],
// [Sentinel.KillMaster]). Starting them takes a second or two, so a test
// binary may share one of each ([SharedCluster], [SharedSentinel]), which
// its TestMain stops through [Main].
//
// Tests sharing a Redis keep apart with [Prefix], which also deletes the
// test's keys when it ends. [CountingHook] counts the commands and round
// trips a client makes. [NewProxy] puts a TCP proxy between a client and
// Redis that injects faults on demand: latency, a frozen Redis, dropped
// connections, refused connections, and connections cut mid-command.
package redistest

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// defaultAddr is where Client looks for a local Redis (a variable so the
// package's own tests can make it unreachable).
var defaultAddr = "127.0.0.1:6379"

// howTo is the end of the failure message when no Redis can be found.
const howTo = `to run these tests, do one of:
  - set REDIS_URL, e.g. REDIS_URL=redis://127.0.0.1:6379/0
  - run a Redis on 127.0.0.1:6379, e.g. docker run --rm -p 6379:6379 redis:7
  - put redis-server on PATH (apt-get install redis-server, brew install redis),
    and the tests start their own`

// Client returns a new client (its own connection pool, as a separate
// replica would have) connected to the Redis found as described in the
// package documentation, and closes it when the test ends. All the clients
// returned to one test talk to the same Redis. The client is created with
// ContextTimeoutEnabled, so context deadlines bound its network waits.
func Client(t testing.TB) redis.UniversalClient {
	t.Helper()
	opt := find(t)
	c := redis.NewClient(opt)
	t.Cleanup(func() { c.Close() })
	return c
}

// Options returns the options [Client] creates its clients with (a fresh
// copy on every call), for a test that sets more of them, such as
// AutoPipelineOptions or Protocol, before calling redis.NewClient.
func Options(t testing.TB) *redis.Options {
	t.Helper()
	return find(t)
}

// URL returns the URL of the Redis [Client] finds, for a test of code that
// takes one (redisstore.NewClient): REDIS_URL when it is set, else
// redis://host:port/0.
func URL(t testing.TB) string {
	t.Helper()
	opt := find(t)
	if u := os.Getenv("REDIS_URL"); u != "" {
		return u
	}
	return "redis://" + opt.Addr + "/0"
}

// ClientAt returns a new client of the Redis at addr (host:port), with the
// same settings as [Client], and closes it when the test ends. Use it with
// [Start].
func ClientAt(t testing.TB, addr string) redis.UniversalClient {
	t.Helper()
	c := redis.NewClient(tune(&redis.Options{Addr: addr}))
	t.Cleanup(func() { c.Close() })
	return c
}

// tune sets what the store tests rely on: context deadlines interrupt I/O,
// and a dead address fails within a second.
func tune(opt *redis.Options) *redis.Options {
	opt.ContextTimeoutEnabled = true
	if opt.DialTimeout == 0 {
		opt.DialTimeout = time.Second
	}
	return opt
}

var (
	probeMu sync.Mutex
	probed  = map[string]bool{} // address -> answered PING
	started sync.Map            // testing.TB -> address of its private server
)

func find(t testing.TB) *redis.Options {
	t.Helper()
	if u := os.Getenv("REDIS_URL"); u != "" {
		opt, err := redis.ParseURL(u)
		if err != nil {
			t.Fatalf("redistest: REDIS_URL=%q: %v", u, err)
		}
		c := redis.NewClient(tune(opt))
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		err = c.Ping(ctx).Err()
		cancel()
		c.Close()
		if err != nil {
			t.Fatalf("redistest: REDIS_URL=%q does not answer PING: %v\n%s", u, err, howTo)
		}
		return tune(opt)
	}
	if reachable(defaultAddr) {
		return tune(&redis.Options{Addr: defaultAddr})
	}
	if addr, ok := started.Load(t); ok {
		return tune(&redis.Options{Addr: addr.(string)})
	}
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Fatalf("redistest: no Redis: REDIS_URL is not set, nothing answers on %s, and redis-server is not on PATH\n%s", defaultAddr, howTo)
	}
	addr, _, _ := Start(t)
	started.Store(t, addr)
	t.Cleanup(func() { started.Delete(t) })
	return tune(&redis.Options{Addr: addr})
}

// reachable reports, once per address and process, whether a Redis answers
// PING at addr.
func reachable(addr string) bool {
	probeMu.Lock()
	defer probeMu.Unlock()
	ok, done := probed[addr]
	if !done {
		ok = ping(addr, 500*time.Millisecond) == nil
		probed[addr] = ok
	}
	return ok
}

// ping sends an inline PING to addr and expects +PONG, without a client.
func ping(addr string, timeout time.Duration) error {
	c, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(timeout))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if !strings.HasPrefix(line, "+PONG") {
		return fmt.Errorf("PING answered %q", strings.TrimSpace(line))
	}
	return nil
}

// Start starts a private redis-server from PATH on a free port of
// 127.0.0.1 (--save "" --appendonly no, so it keeps nothing on disk) and
// returns its address. stop kills it (SIGKILL, as a crash would) and waits
// for it to exit; restart starts it again on the same address, empty. Both
// may be called more than once, and must be called from the test's
// goroutine as they fail the test on error. The server is killed when the
// test ends. Start fails the test if redis-server is not on PATH.
func Start(t testing.TB) (addr string, stop func(), restart func()) {
	t.Helper()
	return StartWith(t)
}

// StartWith is [Start] with more redis-server options, e.g.
// "--rename-command", "GETEX", "" to stand for an older Redis.
func StartWith(t testing.TB, args ...string) (addr string, stop func(), restart func()) {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatalf("redistest: redis-server is not on PATH\n%s", howTo)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("redistest: finding a free port: %v", err)
	}
	addr = l.Addr().String()
	l.Close()
	s := &server{bin: bin, addr: addr, dir: t.TempDir(), args: args}
	if err := s.start(); err != nil {
		t.Fatalf("redistest: %v", err)
	}
	t.Cleanup(s.stop)
	restart = func() {
		t.Helper()
		if err := s.start(); err != nil {
			t.Fatalf("redistest: restarting: %v", err)
		}
	}
	return addr, s.stop, restart
}

// server is one redis-server process, started and stopped at will.
type server struct {
	bin, addr, dir string
	// conf, if set, is a configuration file the server starts from, in
	// Sentinel mode.
	conf string
	// args are more options, after the common ones.
	args []string

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{} // closed when cmd has been waited for
}

func (s *server) start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		return nil
	}
	_, port, _ := net.SplitHostPort(s.addr)
	var out bytes.Buffer
	args := []string{"--port", port, "--bind", "127.0.0.1", "--dir", s.dir}
	if s.conf != "" {
		args = append([]string{s.conf, "--sentinel"}, args...)
	} else {
		// No persistence; a replica's first sync starts at once rather
		// than after the default 5s wait for other replicas.
		args = append(args, "--save", "", "--appendonly", "no", "--repl-diskless-sync-delay", "0")
	}
	cmd := exec.Command(s.bin, append(args, s.args...)...)
	cmd.Stdout = &out
	cmd.Stderr = &out
	if err := startProcess(cmd); err != nil {
		return err
	}
	exited := make(chan struct{})
	go func() {
		cmd.Wait()
		close(exited)
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if ping(s.addr, 200*time.Millisecond) == nil {
			break
		}
		select {
		case <-exited:
			return fmt.Errorf("redis-server on %s exited: %s", s.addr, out.String())
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			<-exited
			return fmt.Errorf("redis-server on %s did not answer within 10s: %s", s.addr, out.String())
		}
	}
	s.cmd, s.exited = cmd, exited
	return nil
}

// signal sends sig to the process, if it runs.
func (s *server) signal(sig os.Signal) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return nil
	}
	return s.cmd.Process.Signal(sig)
}

// running reports whether the process was started and not stopped.
func (s *server) running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cmd != nil
}

func (s *server) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	s.cmd.Process.Kill()
	<-s.exited
	s.cmd, s.exited = nil, nil
}

// Prefix returns a key prefix no other test uses (the test's name and a
// random part, e.g. "mcphtest:TestX/sub:K3VQ7YH2MA:"), and deletes every key
// under it through c when the test ends.
func Prefix(t testing.TB, c redis.UniversalClient) string {
	t.Helper()
	name := strings.Map(func(r rune) rune {
		switch {
		case 'a' <= r && r <= 'z', 'A' <= r && r <= 'Z', '0' <= r && r <= '9', r == '/', r == '_', r == '-', r == '.':
			return r
		}
		return '_'
	}, t.Name())
	p := "mcphtest:" + name + ":" + rand.Text()[:10] + ":"
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		keys, err := scan(ctx, c, p)
		for len(keys) > 0 && err == nil {
			n := min(len(keys), 500)
			for _, k := range keys[:n] {
				// One DEL per key: in a cluster the keys are in
				// different slots.
				if err = c.Del(ctx, k).Err(); err != nil {
					break
				}
			}
			keys = keys[n:]
		}
		if err != nil {
			t.Logf("redistest: deleting the keys under %q: %v", p, err)
		}
	})
	return p
}

// Keys returns every key under prefix, on every master of a cluster. It
// fails the test on error.
func Keys(t testing.TB, c redis.UniversalClient, prefix string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	keys, err := scan(ctx, c, prefix)
	if err != nil {
		t.Fatalf("redistest: listing the keys under %q: %v", prefix, err)
	}
	return keys
}

func scan(ctx context.Context, c redis.UniversalClient, prefix string) ([]string, error) {
	// The prefix comes from Prefix or from the caller's Options; escape
	// the glob characters anyway.
	pattern := strings.NewReplacer(`\`, `\\`, `*`, `\*`, `?`, `\?`, `[`, `\[`, `]`, `\]`).Replace(prefix) + "*"
	var mu sync.Mutex
	var keys []string
	one := func(ctx context.Context, c redis.Cmdable) error {
		it := c.Scan(ctx, 0, pattern, 1000).Iterator()
		for it.Next(ctx) {
			mu.Lock()
			keys = append(keys, it.Val())
			mu.Unlock()
		}
		return it.Err()
	}
	var err error
	if cc, ok := c.(*redis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error { return one(ctx, n) })
	} else {
		err = one(ctx, c)
	}
	return keys, err
}

// StartReplica starts a private redis-server like [Start] that replicates
// the Redis at master (host:port), waits until it is in sync, and returns
// its address. It is killed when the test ends. Replication connects to
// master as given, so a [Proxy] in between can stall or cut it.
func StartReplica(t testing.TB, master string) string {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatalf("redistest: redis-server is not on PATH\n%s", howTo)
	}
	addrs, err := freeAddrs(1)
	if err != nil {
		t.Fatalf("redistest: StartReplica: %v", err)
	}
	host, port, err := net.SplitHostPort(master)
	if err != nil {
		t.Fatalf("redistest: StartReplica: %v", err)
	}
	s := &server{bin: bin, addr: addrs[0], dir: t.TempDir(), args: []string{"--replicaof", host, port}}
	if err := s.start(); err != nil {
		t.Fatalf("redistest: StartReplica: %v", err)
	}
	t.Cleanup(s.stop)
	c := adminClient(s.addr)
	defer c.Close()
	m := adminClient(master)
	defer m.Close()
	ctx, cancel := context.WithTimeout(context.Background(), settleTimeout)
	defer cancel()
	err = waitUntil(ctx, "the replica syncs", func() error {
		repl, err := c.Info(ctx, "replication").Result()
		if err != nil {
			return err
		}
		if !strings.Contains(repl, "master_link_status:up") {
			return fmt.Errorf("replication link down")
		}
		// The master counts the replica in WAIT a moment after the
		// replica reports its link up.
		if n, err := m.Do(ctx, "WAIT", 1, 50).Int64(); err != nil || n < 1 {
			return fmt.Errorf("the master does not count the replica yet (%d, %v)", n, err)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("redistest: StartReplica: %v", err)
	}
	return s.addr
}
