package redistest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// SentinelMaster is the name the Sentinels of [StartSentinel] monitor
// their master under.
const SentinelMaster = "mcph"

// sentinelDownAfter is the down-after-milliseconds of the Sentinels tests
// start: a master that stops answering is failed over a second or two
// after this.
const sentinelDownAfter = 1000 * time.Millisecond

// Sentinel is a Redis master, its replica and three Sentinels monitoring
// them (quorum 2), private redis-server processes on 127.0.0.1 without
// persistence, started by [StartSentinel] or [SharedSentinel]. Its methods
// fail the test they are given on error, so call them from the test's
// goroutine. They are safe for concurrent use.
type Sentinel struct {
	mu        sync.Mutex // serialises the changes of roles
	data      []*server  // the master and the replica, in the order started
	sentinels []*server
	admin     map[string]*redis.Client // by address
}

// StartSentinel starts a master, a replica of it and three Sentinels, in
// parallel, and waits until the replica is in sync and every Sentinel
// knows the master, the replica and the two other Sentinels. The processes
// are killed and their directories removed when the test ends. It fails
// the test if redis-server is not on PATH or the set does not form within
// 30s.
func StartSentinel(t testing.TB) *Sentinel {
	t.Helper()
	s, err := startSentinel(t.TempDir())
	if err != nil {
		t.Fatalf("redistest: StartSentinel: %v", err)
	}
	t.Cleanup(s.stop)
	return s
}

func startSentinel(dir string) (*Sentinel, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, fmt.Errorf("redis-server is not on PATH\n%s", howTo)
	}
	// A topology that does not start, or whose replica never links to its
	// master (a port taken between its choice and its use, a machine too
	// busy for the Sentinels to agree in time), is stopped and made again
	// on other ports, up to three times.
	for attempt := 0; ; attempt++ {
		var s *Sentinel
		s, err = spawnSentinel(bin, fmt.Sprintf("%s/%d", dir, attempt))
		if err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), settleTimeout)
			err = s.settle(ctx, s.data[0].addr, true)
			cancel()
			if err == nil {
				return s, nil
			}
		}
		if s != nil {
			s.stop()
		}
		if attempt == 2 {
			return nil, err
		}
	}
}

func spawnSentinel(bin, dir string) (*Sentinel, error) {
	addrs, err := freeAddrs(5)
	if err != nil {
		return nil, err
	}
	s := &Sentinel{admin: map[string]*redis.Client{}}
	mk := func(name string) (string, error) {
		d := dir + "/" + name
		return d, os.MkdirAll(d, 0o755)
	}
	mhost, mport, _ := net.SplitHostPort(addrs[0])
	for i, name := range []string{"master", "replica"} {
		d, err := mk(name)
		if err != nil {
			return nil, err
		}
		srv := &server{bin: bin, addr: addrs[i], dir: d}
		if i == 1 {
			srv.args = []string{"--replicaof", mhost, mport}
		}
		s.data = append(s.data, srv)
	}
	// Each Sentinel starts knowing the replica and the other Sentinels
	// (as its own rewritten configuration would after a first run), so
	// that they agree at once instead of after their first hellos.
	ids := make([]string, 3)
	for i := range ids {
		b := make([]byte, 20)
		rand.Read(b)
		ids[i] = hex.EncodeToString(b)
	}
	rhost, rport, _ := net.SplitHostPort(addrs[1])
	for i := range 3 {
		d, err := mk(fmt.Sprint("sentinel", i))
		if err != nil {
			return nil, err
		}
		var conf strings.Builder
		fmt.Fprintf(&conf, "sentinel myid %s\n", ids[i])
		fmt.Fprintf(&conf, "sentinel monitor %s %s %s 2\n", SentinelMaster, mhost, mport)
		fmt.Fprintf(&conf, "sentinel down-after-milliseconds %s %d\n", SentinelMaster, sentinelDownAfter.Milliseconds())
		fmt.Fprintf(&conf, "sentinel failover-timeout %s 10000\n", SentinelMaster)
		fmt.Fprintf(&conf, "sentinel known-replica %s %s %s\n", SentinelMaster, rhost, rport)
		for j := range 3 {
			if j != i {
				h, p, _ := net.SplitHostPort(addrs[2+j])
				fmt.Fprintf(&conf, "sentinel known-sentinel %s %s %s %s\n", SentinelMaster, h, p, ids[j])
			}
		}
		file := d + "/sentinel.conf"
		if err := os.WriteFile(file, []byte(conf.String()), 0o644); err != nil {
			return nil, err
		}
		s.sentinels = append(s.sentinels, &server{bin: bin, addr: addrs[2+i], dir: d, conf: file})
	}
	all := append(slices.Clone(s.data), s.sentinels...)
	for _, srv := range all {
		s.admin[srv.addr] = adminClient(srv.addr)
	}
	return s, parallel(len(all), func(i int) error { return all[i].start() })
}

// MasterName returns the name the Sentinels monitor the master under,
// [SentinelMaster].
func (s *Sentinel) MasterName() string { return SentinelMaster }

// Addrs returns the addresses (host:port) of the three Sentinels.
func (s *Sentinel) Addrs() []string {
	addrs := make([]string, len(s.sentinels))
	for i, srv := range s.sentinels {
		addrs[i] = srv.addr
	}
	return addrs
}

// Client returns a new Sentinel failover client of s (redis.NewFailoverClient:
// it asks the Sentinels for the master and follows it across failovers),
// closed when the test ends, tuned like [Client]'s (ContextTimeoutEnabled,
// a DialTimeout of one second) and with DialerRetries: 1.
func (s *Sentinel) Client(t testing.TB) *redis.Client {
	t.Helper()
	c := redis.NewFailoverClient(&redis.FailoverOptions{
		MasterName:            SentinelMaster,
		SentinelAddrs:         s.Addrs(),
		ContextTimeoutEnabled: true,
		DialTimeout:           time.Second,
		DialerRetries:         1,
	})
	t.Cleanup(func() { c.Close() })
	return c
}

// Master returns the address of the master, as the Sentinels name it.
func (s *Sentinel) Master(t testing.TB) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	addr, err := s.masterAddr(ctx, s.sentinels[0].addr)
	if err != nil {
		t.Fatalf("redistest: Sentinel.Master: %v", err)
	}
	return addr
}

// Replica returns the address of a replica of the master: the other data
// server.
func (s *Sentinel) Replica(t testing.TB) string {
	t.Helper()
	m := s.Master(t)
	for _, srv := range s.data {
		if srv.addr != m {
			return srv.addr
		}
	}
	t.Fatal("redistest: Sentinel.Replica: no replica")
	return ""
}

// Settle waits until the set is whole again after a failover: the
// Sentinels agree on the master and see it up, and the other server is
// its replica, in sync, known to every Sentinel — which, after
// [Sentinel.Failover], takes until the Sentinels turn the old master into
// a replica, about ten seconds.
func (s *Sentinel) Settle(t testing.TB) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), settleTimeout)
	defer cancel()
	m, err := s.masterAddr(ctx, s.sentinels[0].addr)
	if err == nil {
		err = s.settle(ctx, m, true)
	}
	if err != nil {
		t.Fatalf("redistest: Sentinel.Settle: %v", err)
	}
}

// Failover asks a Sentinel for a failover of the healthy master
// (SENTINEL FAILOVER: the replica is promoted at once, without the
// Sentinels' agreement) and waits until every Sentinel names the replica
// as the master and the replica reports itself master, then returns its
// address. The old master is left as it is, taking writes nobody else
// sees, until the Sentinels turn it into a replica of the new master,
// about ten seconds later — as in production. If the previous failover's
// old master has not been turned into a replica yet, Failover first waits
// for it.
func (s *Sentinel) Failover(t testing.TB) (promoted string) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), settleTimeout)
	defer cancel()
	old, err := s.masterAddr(ctx, s.sentinels[0].addr)
	if err == nil {
		err = waitUntil(ctx, "a Sentinel starts a failover", func() error {
			err := s.admin[s.sentinels[0].addr].Do(ctx, "sentinel", "failover", SentinelMaster).Err()
			if err != nil && (strings.Contains(err.Error(), "NOGOODSLAVE") || strings.Contains(err.Error(), "INPROG")) {
				return err // the last failover's old master is not a replica yet
			}
			if err != nil {
				return &permanent{err}
			}
			return nil
		})
	}
	if err == nil {
		promoted, err = s.switched(ctx, old)
	}
	if err != nil {
		t.Fatalf("redistest: Sentinel.Failover: %v", err)
	}
	return promoted
}

// KillMaster kills the master (SIGKILL, as a crash would), waits until the
// Sentinels agreed it is down and promoted the replica, and returns the
// new master's address. The killed server is started again, empty, as a
// replica of the new master, when the test ends, or earlier by calling
// restart, which waits until it is in sync and the Sentinels see it up;
// restart may be called more than once.
func (s *Sentinel) KillMaster(t testing.TB) (promoted string, restart func()) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), settleTimeout)
	defer cancel()
	old, err := s.masterAddr(ctx, s.sentinels[0].addr)
	var dead *server
	for _, srv := range s.data {
		if srv.addr == old {
			dead = srv
		}
	}
	if err == nil && dead == nil {
		err = fmt.Errorf("the Sentinels name %s, not one of the data servers", old)
	}
	if err == nil {
		dead.stop()
		promoted, err = s.switched(ctx, old)
	}
	if err != nil {
		t.Fatalf("redistest: Sentinel.KillMaster: %v", err)
	}
	var once sync.Once
	restart = func() {
		t.Helper()
		once.Do(func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			h, p, _ := net.SplitHostPort(promoted)
			dead.args = []string{"--replicaof", h, p}
			// On a starved machine the restarted server's replication link
			// has been seen to stay down for the whole settle timeout,
			// though it links within a second otherwise; it is stopped and
			// started again, up to three times, as a topology that never
			// links at its start is made again (startSentinel).
			var err error
			for range 3 {
				ctx, cancel := context.WithTimeout(context.Background(), settleTimeout/2)
				if err = dead.start(); err == nil {
					err = s.settle(ctx, promoted, false)
				}
				cancel()
				if err == nil {
					return
				}
				dead.stop()
			}
			t.Errorf("redistest: restarting %s: %v", dead.addr, err)
		})
	}
	t.Cleanup(restart)
	return promoted, restart
}

// switched waits until every Sentinel names a master other than old, the
// same one, and that server reports itself master.
func (s *Sentinel) switched(ctx context.Context, old string) (string, error) {
	var promoted string
	err := waitUntil(ctx, "the Sentinels switch to a new master", func() error {
		promoted = ""
		for _, srv := range s.sentinels {
			addr, err := s.masterAddr(ctx, srv.addr)
			if err != nil {
				return err
			}
			if addr == old || (promoted != "" && addr != promoted) {
				return fmt.Errorf("Sentinel %s names %s", srv.addr, addr)
			}
			promoted = addr
		}
		c := s.admin[promoted]
		if c == nil {
			return &permanent{fmt.Errorf("the Sentinels name an unknown master %s", promoted)}
		}
		if role, err := nodeRole(ctx, c); err != nil || role != "master" {
			return fmt.Errorf("%s is %s (%v)", promoted, role, err)
		}
		return nil
	})
	return promoted, err
}

// settle waits until every Sentinel names master, sees it up, knows the
// two other Sentinels, and (if replicaSynced) knows every other data
// server as a replica that is up, and every other data server that runs
// reports its replication link up.
func (s *Sentinel) settle(ctx context.Context, master string, replicaKnown bool) error {
	return waitUntil(ctx, "the Sentinels agree", func() error {
		for _, srv := range s.data {
			if srv.addr == master || !srv.running() {
				continue
			}
			repl, err := s.admin[srv.addr].Info(ctx, "replication").Result()
			if err != nil {
				return err
			}
			if !strings.Contains(repl, "master_link_status:up") {
				return fmt.Errorf("%s: replication link down", srv.addr)
			}
		}
		for _, srv := range s.sentinels {
			c := s.admin[srv.addr]
			addr, err := s.masterAddr(ctx, srv.addr)
			if err != nil {
				return err
			}
			if addr != master {
				return fmt.Errorf("Sentinel %s names %s, want %s", srv.addr, addr, master)
			}
			m, err := c.Do(ctx, "sentinel", "master", SentinelMaster).Result()
			if err != nil {
				return err
			}
			fields := toMap(m)
			if fields["flags"] != "master" || fields["num-other-sentinels"] != "2" {
				return fmt.Errorf("Sentinel %s: master flags %q, %s other Sentinels", srv.addr, fields["flags"], fields["num-other-sentinels"])
			}
			rs, err := c.Do(ctx, "sentinel", "replicas", SentinelMaster).Slice()
			if err != nil {
				return err
			}
			up := 0
			for _, r := range rs {
				f := toMap(r)
				if f["flags"] == "slave" {
					up++
				}
			}
			if want := len(s.data) - 1; replicaKnown && up < want {
				return fmt.Errorf("Sentinel %s sees %d replicas up, want %d", srv.addr, up, want)
			}
		}
		return nil
	})
}

func (s *Sentinel) masterAddr(ctx context.Context, sentinel string) (string, error) {
	v, err := s.admin[sentinel].Do(ctx, "sentinel", "get-master-addr-by-name", SentinelMaster).StringSlice()
	if err != nil {
		return "", err
	}
	if len(v) != 2 {
		return "", fmt.Errorf("SENTINEL GET-MASTER-ADDR-BY-NAME = %q", v)
	}
	return net.JoinHostPort(v[0], v[1]), nil
}

func (s *Sentinel) stop() {
	all := append(slices.Clone(s.data), s.sentinels...)
	parallel(len(all), func(i int) error { all[i].stop(); return nil })
	for _, c := range s.admin {
		c.Close()
	}
}

// toMap turns a RESP2 flat array or a RESP3 map of strings into a map.
func toMap(v any) map[string]string {
	out := map[string]string{}
	switch v := v.(type) {
	case []any:
		for i := 0; i+1 < len(v); i += 2 {
			k, _ := v[i].(string)
			out[k] = fmt.Sprint(v[i+1])
		}
	case map[any]any:
		for k, x := range v {
			out[fmt.Sprint(k)] = fmt.Sprint(x)
		}
	}
	return out
}

// permanent marks an error waitUntil must not retry.
type permanent struct{ err error }

func (p *permanent) Error() string { return p.err.Error() }
func (p *permanent) Unwrap() error { return p.err }
