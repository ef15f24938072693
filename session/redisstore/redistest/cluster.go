package redistest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// clusterNodeTimeout is the cluster-node-timeout of the clusters tests
// start: a master that stops answering is failed over about two to three
// times this after it died.
const clusterNodeTimeout = 1000 * time.Millisecond

// settleTimeout bounds every wait for a cluster or a set of Sentinels to
// reach the state a helper promises. Sentinels on a machine busy with a
// parallel test run have been seen to need more than 30 s to agree.
const settleTimeout = 60 * time.Second

// Cluster is a Redis Cluster of private redis-server processes on
// 127.0.0.1 (cluster mode, no persistence, each in a directory of its own),
// started by [StartCluster] or [SharedCluster]. Its methods that change the
// cluster wait until every live node agrees on the new layout, so a test
// never sees the cluster half-way through a change it asked for.
//
// Its methods fail the test they are given on error, so call them from the
// test's goroutine. They are safe for concurrent use.
type Cluster struct {
	masters, replicas int

	mu    sync.Mutex // guards the nodes' roles during a change
	nodes []*clusterNode
}

// clusterNode is one redis-server of a Cluster.
type clusterNode struct {
	srv   *server
	bus   int    // the cluster bus port
	id    string // the node id, fixed for the node's life (nodes.conf)
	admin *redis.Client
}

// StartCluster starts a Redis Cluster of masters masters (at least 1), each
// with replicas replicas, all in parallel, assigns the 16384 slots evenly
// to the masters and waits until every node reports the cluster ok and
// agrees on its layout. The processes are killed and their directories
// removed when the test ends. It fails the test if redis-server is not on
// PATH or the cluster does not form within 30s.
func StartCluster(t testing.TB, masters, replicas int) *Cluster {
	t.Helper()
	c, err := startCluster(t.TempDir(), masters, replicas)
	if err != nil {
		t.Fatalf("redistest: StartCluster: %v", err)
	}
	t.Cleanup(c.stop)
	return c
}

func startCluster(dir string, masters, replicas int) (*Cluster, error) {
	if masters < 1 || replicas < 0 {
		return nil, fmt.Errorf("%d masters and %d replicas each", masters, replicas)
	}
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, fmt.Errorf("redis-server is not on PATH\n%s", howTo)
	}
	n := masters * (1 + replicas)
	c := &Cluster{masters: masters, replicas: replicas}
	// A redis-server that loses the race for its port exits at once:
	// start again on new ports.
	for attempt := 0; ; attempt++ {
		err = c.spawn(bin, dir, n, attempt)
		if err == nil {
			break
		}
		c.stop()
		if attempt == 2 {
			return nil, err
		}
	}
	if err := c.form(); err != nil {
		c.stop()
		return nil, err
	}
	return c, nil
}

// spawn starts the n processes in parallel.
func (c *Cluster) spawn(bin, dir string, n, attempt int) error {
	addrs, err := freeAddrs(2 * n)
	if err != nil {
		return err
	}
	c.nodes = make([]*clusterNode, n)
	for i := range c.nodes {
		_, bus, _ := net.SplitHostPort(addrs[n+i])
		d := fmt.Sprintf("%s/node%d.%d", dir, i, attempt)
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
		busPort, _ := strconv.Atoi(bus)
		c.nodes[i] = &clusterNode{bus: busPort, srv: &server{
			bin: bin, addr: addrs[i], dir: d,
			args: []string{
				"--cluster-enabled", "yes",
				"--cluster-config-file", "nodes.conf",
				"--cluster-port", bus,
				"--cluster-node-timeout", strconv.Itoa(int(clusterNodeTimeout / time.Millisecond)),
				// A replica may always be promoted, however long it
				// was cut off (tests stop and start nodes at will).
				"--cluster-replica-validity-factor", "0",
			},
		}}
	}
	return parallel(len(c.nodes), func(i int) error {
		nd := c.nodes[i]
		if err := nd.srv.start(); err != nil {
			return err
		}
		nd.admin = adminClient(nd.srv.addr)
		return nil
	})
}

// form assigns the slots, introduces the nodes to each other, attaches
// the replicas and waits until the cluster is settled.
func (c *Cluster) form() error {
	ctx, cancel := context.WithTimeout(context.Background(), settleTimeout)
	defer cancel()
	err := parallel(len(c.nodes), func(i int) error {
		nd := c.nodes[i]
		id, err := nd.admin.ClusterMyID(ctx).Result()
		if err != nil {
			return err
		}
		nd.id = id
		// Distinct epochs, as redis-cli gives them: no collision to
		// resolve before the cluster agrees.
		if err := nd.admin.Do(ctx, "cluster", "set-config-epoch", i+1).Err(); err != nil {
			return err
		}
		if i < c.masters {
			lo, hi := i*16384/c.masters, (i+1)*16384/c.masters-1
			return nd.admin.Do(ctx, "cluster", "addslotsrange", lo, hi).Err()
		}
		return nil
	})
	if err != nil {
		return err
	}
	first := c.nodes[0]
	for _, nd := range c.nodes[1:] {
		host, port, _ := net.SplitHostPort(nd.srv.addr)
		if err := first.admin.Do(ctx, "cluster", "meet", host, port, nd.bus).Err(); err != nil {
			return err
		}
	}
	if err := waitUntil(ctx, "every node knows every other", func() error {
		for _, nd := range c.nodes {
			view, err := nodesView(ctx, nd.admin)
			if err != nil {
				return err
			}
			if len(view) != len(c.nodes) {
				return fmt.Errorf("%s knows %d nodes", nd.srv.addr, len(view))
			}
			for _, l := range view {
				if l.has("handshake") || l.has("noaddr") {
					return fmt.Errorf("%s sees %s in %v", nd.srv.addr, l.id, l.flags)
				}
			}
		}
		return nil
	}); err != nil {
		return err
	}
	for i, nd := range c.nodes[c.masters:] {
		master := c.nodes[i%c.masters]
		if err := waitUntil(ctx, "a replica attaches", func() error {
			return nd.admin.Do(ctx, "cluster", "replicate", master.id).Err()
		}); err != nil {
			return err
		}
	}
	return c.settle(ctx)
}

// Addrs returns the address (host:port) of every node, masters and
// replicas, as seed addresses for a cluster client.
func (c *Cluster) Addrs() []string {
	addrs := make([]string, len(c.nodes))
	for i, nd := range c.nodes {
		addrs[i] = nd.srv.addr
	}
	return addrs
}

// Client returns a new cluster client of c, closed when the test ends,
// tuned like [Client]'s (ContextTimeoutEnabled, a DialTimeout of one
// second) and with DialerRetries: 1, so that a dead node fails a command
// at once instead of after five dials.
func (c *Cluster) Client(t testing.TB) *redis.ClusterClient {
	t.Helper()
	cc := redis.NewClusterClient(&redis.ClusterOptions{
		Addrs:                 c.Addrs(),
		ContextTimeoutEnabled: true,
		DialTimeout:           time.Second,
		DialerRetries:         1,
	})
	t.Cleanup(func() { cc.Close() })
	return cc
}

// MasterOf returns the address of the master that serves key's slot.
func (c *Cluster) MasterOf(t testing.TB, key string) string {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	nd, err := c.masterOf(key)
	if err != nil {
		t.Fatalf("redistest: Cluster.MasterOf: %v", err)
	}
	return nd.srv.addr
}

// Failover makes a replica of the master of each key take over its slots
// with CLUSTER FAILOVER (the manual failover of a healthy master: the
// master stops taking writes until its replica caught up, then the replica
// takes over and the old master becomes its replica), or of every master
// if no key is given, all at once, and waits until the cluster is settled
// again. It fails the test if a master to fail over has no replica.
func (c *Cluster) Failover(t testing.TB, keys ...string) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.failover(keys); err != nil {
		t.Fatalf("redistest: Cluster.Failover: %v", err)
	}
}

func (c *Cluster) failover(keys []string) error {
	ctx, cancel := context.WithTimeout(context.Background(), settleTimeout)
	defer cancel()
	var masters []*clusterNode
	if len(keys) == 0 {
		for _, nd := range c.live() {
			if role, _ := nodeRole(ctx, nd.admin); role == "master" {
				masters = append(masters, nd)
			}
		}
	}
	for _, k := range keys {
		nd, err := c.masterOf(k)
		if err != nil {
			return err
		}
		if !slices.Contains(masters, nd) {
			masters = append(masters, nd)
		}
	}
	return parallel(len(masters), func(i int) error {
		m := masters[i]
		r, err := c.replicaOf(ctx, m)
		if err != nil {
			return err
		}
		if err := r.admin.Do(ctx, "cluster", "failover").Err(); err != nil {
			return err
		}
		return waitUntil(ctx, "the replica of "+m.srv.addr+" takes over", func() error {
			if role, err := nodeRole(ctx, r.admin); err != nil || role != "master" {
				return fmt.Errorf("%s is %s (%v)", r.srv.addr, role, err)
			}
			return nil
		})
	}, func() error { return c.settle(ctx) })
}

// KillMaster kills the master serving key's slot (SIGKILL, as a crash
// would), waits until the cluster promoted one of its replicas and is
// settled again, and returns the address of the new master. The killed
// node is started again (empty) when the test ends, or earlier by calling
// restart, which waits until it rejoined as a replica and the cluster is
// settled; restart may be called more than once. It fails the test if the
// master has no replica.
func (c *Cluster) KillMaster(t testing.TB, key string) (promoted string, restart func()) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), settleTimeout)
	defer cancel()
	m, err := c.masterOf(key)
	if err == nil {
		_, err = c.replicaOf(ctx, m)
	}
	if err != nil {
		t.Fatalf("redistest: Cluster.KillMaster: %v", err)
	}
	m.srv.stop()
	var newMaster *clusterNode
	err = waitUntil(ctx, "a replica of "+m.srv.addr+" is promoted", func() error {
		nd, err := c.masterOf(key)
		if err != nil {
			return err
		}
		if nd == m {
			return errors.New("the dead master still serves the slot")
		}
		newMaster = nd
		return nil
	}, func() error { return c.settle(ctx) })
	if err != nil {
		t.Fatalf("redistest: Cluster.KillMaster: %v", err)
	}
	var once sync.Once
	restart = func() {
		t.Helper()
		once.Do(func() {
			c.mu.Lock()
			defer c.mu.Unlock()
			ctx, cancel := context.WithTimeout(context.Background(), settleTimeout)
			defer cancel()
			if err := m.srv.start(); err != nil {
				t.Errorf("redistest: restarting %s: %v", m.srv.addr, err)
				return
			}
			if err := c.settle(ctx); err != nil {
				t.Errorf("redistest: restarting %s: %v", m.srv.addr, err)
			}
		})
	}
	t.Cleanup(restart)
	return newMaster.srv.addr, restart
}

// FreezeReplicas stops the processes of the replicas of the master that
// serves key (SIGSTOP), so that they acknowledge nothing, and returns thaw,
// which lets them go on (SIGCONT) and waits until the cluster is settled
// again. thaw runs when the test ends, if not before, and may be called
// more than once. Keep the freeze well under the cluster's node timeout
// (one second), or the cluster starts to consider the replicas failed.
func (c *Cluster) FreezeReplicas(t testing.TB, key string) (thaw func()) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), settleTimeout)
	defer cancel()
	m, err := c.masterOf(key)
	if err != nil {
		t.Fatalf("redistest: Cluster.FreezeReplicas: %v", err)
	}
	var frozen []*clusterNode
	for {
		r, err := c.replicaOf(ctx, m, frozen...)
		if err != nil {
			break
		}
		if err := r.srv.freeze(); err != nil {
			t.Fatalf("redistest: Cluster.FreezeReplicas: %v", err)
		}
		frozen = append(frozen, r)
	}
	if len(frozen) == 0 {
		t.Fatalf("redistest: Cluster.FreezeReplicas: the master %s has no replica", m.srv.addr)
	}
	var once sync.Once
	thaw = func() {
		t.Helper()
		once.Do(func() {
			c.mu.Lock()
			defer c.mu.Unlock()
			for _, r := range frozen {
				r.srv.thaw()
			}
			ctx, cancel := context.WithTimeout(context.Background(), settleTimeout)
			defer cancel()
			if err := c.settle(ctx); err != nil {
				t.Errorf("redistest: thawing the replicas: %v", err)
			}
		})
	}
	t.Cleanup(thaw)
	return thaw
}

// stop kills every node and waits for them.
func (c *Cluster) stop() {
	parallel(len(c.nodes), func(i int) error {
		if nd := c.nodes[i]; nd != nil {
			if nd.admin != nil {
				nd.admin.Close()
			}
			nd.srv.stop()
		}
		return nil
	})
}

// live returns the nodes whose process runs.
func (c *Cluster) live() []*clusterNode {
	var out []*clusterNode
	for _, nd := range c.nodes {
		if nd.srv.running() {
			out = append(out, nd)
		}
	}
	return out
}

// masterOf returns the live master that serves key's slot, as the first
// live node's view says.
func (c *Cluster) masterOf(key string) (*clusterNode, error) {
	live := c.live()
	if len(live) == 0 {
		return nil, errors.New("no live node")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	slot, err := live[0].admin.ClusterKeySlot(ctx, key).Result()
	if err != nil {
		return nil, err
	}
	view, err := nodesView(ctx, live[0].admin)
	if err != nil {
		return nil, err
	}
	for _, l := range view {
		if l.has("master") && !l.has("fail") && l.serves(int(slot)) {
			for _, nd := range live {
				if nd.id == l.id {
					return nd, nil
				}
			}
		}
	}
	return nil, fmt.Errorf("no live master serves slot %d of %q", slot, key)
}

// replicaOf returns a live, replicating replica of the master m, other
// than those of except.
func (c *Cluster) replicaOf(ctx context.Context, m *clusterNode, except ...*clusterNode) (*clusterNode, error) {
	for _, nd := range c.live() {
		if nd == m || slices.Contains(except, nd) {
			continue
		}
		view, err := nodesView(ctx, nd.admin)
		if err != nil {
			return nil, err
		}
		for _, l := range view {
			if l.has("myself") && l.has("slave") && l.master == m.id {
				return nd, nil
			}
		}
	}
	return nil, fmt.Errorf("the master %s has no replica", m.srv.addr)
}

// settle waits until every live node reports the cluster ok, all of them
// describe the same layout (which node is a master of which slots, which
// replicates which), no live node is suspected by any other, every live
// replica's link to its master is up and, when no node is down, every node
// is either a master of slots or a replica (a restarted master is neither
// for a moment).
func (c *Cluster) settle(ctx context.Context) error {
	return waitUntil(ctx, "the cluster settles", func() error {
		live := c.live()
		complete := len(live) == c.masters*(1+c.replicas) // no node is down
		liveIDs := map[string]bool{}
		for _, nd := range live {
			liveIDs[nd.id] = true
		}
		var first string
		for _, nd := range live {
			info, err := nd.admin.ClusterInfo(ctx).Result()
			if err != nil {
				return err
			}
			if !strings.Contains(info, "cluster_state:ok") {
				return fmt.Errorf("%s: cluster state not ok", nd.srv.addr)
			}
			view, err := nodesView(ctx, nd.admin)
			if err != nil {
				return err
			}
			var lines []string
			masters := 0
			for _, l := range view {
				if !liveIDs[l.id] {
					continue
				}
				if l.has("fail") || l.has("fail?") {
					return fmt.Errorf("%s suspects %s", nd.srv.addr, l.id)
				}
				role := "slave"
				if l.has("master") {
					role = "master"
					if len(l.slots) > 0 {
						masters++
					} else if complete {
						// A restarted master comes back as a master
						// without slots before it is turned into a
						// replica: until then its new master has no
						// replica to acknowledge WaitReplicas.
						return fmt.Errorf("%s sees %s as a master without slots", nd.srv.addr, l.id)
					}
				}
				lines = append(lines, l.id+" "+role+" "+l.master+" "+strings.Join(l.slots, ","))
				if l.has("myself") && role == "master" && complete {
					// The master must see its replicas online too: a
					// replica that just rejoined reports its link up
					// before the master counts it for WaitReplicas.
					repl, err := nd.admin.Info(ctx, "replication").Result()
					if err != nil {
						return err
					}
					if n := strings.Count(repl, "state=online"); n < c.replicas {
						return fmt.Errorf("%s: %d replicas online, want %d", nd.srv.addr, n, c.replicas)
					}
				}
				if l.has("myself") && role == "slave" {
					repl, err := nd.admin.Info(ctx, "replication").Result()
					if err != nil {
						return err
					}
					if !strings.Contains(repl, "master_link_status:up") {
						return fmt.Errorf("%s: replication link down", nd.srv.addr)
					}
				}
			}
			if masters != c.masters {
				return fmt.Errorf("%s sees %d masters with slots, want %d", nd.srv.addr, masters, c.masters)
			}
			slices.Sort(lines)
			v := strings.Join(lines, "\n")
			if first == "" {
				first = v
			} else if v != first {
				return fmt.Errorf("the nodes disagree:\n%s\n---\n%s", first, v)
			}
		}
		return c.replicasAck(ctx, live)
	})
}

// replicasAck reports whether every live master has every live replica
// of it acknowledging its writes (WAIT), so that a store with
// Options.WaitReplicas can write as soon as settle returns: a restarted
// node reports its replication link up a moment before its master counts
// it in WAIT.
func (c *Cluster) replicasAck(ctx context.Context, live []*clusterNode) error {
	if c.replicas == 0 || len(live) == 0 {
		return nil
	}
	liveIDs := map[string]bool{}
	for _, nd := range live {
		liveIDs[nd.id] = true
	}
	view, err := nodesView(ctx, live[0].admin)
	if err != nil {
		return err
	}
	want := map[string]int64{}
	for _, l := range view {
		if liveIDs[l.id] && !l.has("master") && liveIDs[l.master] {
			want[l.master]++
		}
	}
	for _, nd := range live {
		if want[nd.id] == 0 {
			continue
		}
		n, err := nd.admin.Do(ctx, "WAIT", want[nd.id], 50).Int64()
		if err != nil {
			return err
		}
		if n < want[nd.id] {
			return fmt.Errorf("%s: %d of its %d replicas acknowledge its writes", nd.srv.addr, n, want[nd.id])
		}
	}
	return nil
}

// nodeLine is one line of CLUSTER NODES.
type nodeLine struct {
	id     string
	flags  []string
	master string // "-" for a master
	slots  []string
}

func (l nodeLine) has(flag string) bool { return slices.Contains(l.flags, flag) }

// serves reports whether the line's slot ranges include slot.
func (l nodeLine) serves(slot int) bool {
	for _, r := range l.slots {
		if strings.HasPrefix(r, "[") { // a slot being migrated
			continue
		}
		lo, hi, ok := strings.Cut(r, "-")
		if !ok {
			hi = lo
		}
		a, err1 := strconv.Atoi(lo)
		b, err2 := strconv.Atoi(hi)
		if err1 == nil && err2 == nil && a <= slot && slot <= b {
			return true
		}
	}
	return false
}

func nodesView(ctx context.Context, c *redis.Client) ([]nodeLine, error) {
	s, err := c.ClusterNodes(ctx).Result()
	if err != nil {
		return nil, err
	}
	var out []nodeLine
	for _, line := range strings.Split(strings.TrimSpace(s), "\n") {
		f := strings.Fields(line)
		if len(f) < 8 {
			continue
		}
		out = append(out, nodeLine{id: f[0], flags: strings.Split(f[2], ","), master: f[3], slots: f[8:]})
	}
	return out, nil
}

// nodeRole returns "master" or "slave", from ROLE.
func nodeRole(ctx context.Context, c *redis.Client) (string, error) {
	v, err := c.Do(ctx, "role").Slice()
	if err != nil {
		return "", err
	}
	if len(v) == 0 {
		return "", errors.New("empty ROLE reply")
	}
	role, _ := v[0].(string)
	return role, nil
}

// adminClient is the client the helpers use to drive one server.
func adminClient(addr string) *redis.Client {
	return redis.NewClient(&redis.Options{
		Addr: addr, ContextTimeoutEnabled: true, DialTimeout: time.Second, DialerRetries: 1,
		MaxRetries: -1, PoolSize: 2,
	})
}

// freeAddrs returns n distinct free addresses of 127.0.0.1.
func freeAddrs(n int) ([]string, error) {
	ls := make([]net.Listener, 0, n)
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	addrs := make([]string, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("finding a free port: %w", err)
		}
		ls = append(ls, l)
		addrs = append(addrs, l.Addr().String())
	}
	return addrs, nil
}

// parallel runs f(0) ... f(n-1) at once and returns the first error; then
// it runs each of then in turn, stopping at the first error.
func parallel(n int, f func(i int) error, then ...func() error) error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { errs[i] = f(i) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	for _, g := range then {
		if err := g(); err != nil {
			return err
		}
	}
	return nil
}

// waitUntil calls each check in turn every 20ms until all of them return
// nil, and returns an error naming what and the last failure when ctx ends
// first.
func waitUntil(ctx context.Context, what string, checks ...func() error) error {
	for {
		var err error
		for _, check := range checks {
			if err = check(); err != nil {
				break
			}
		}
		if err == nil {
			return nil
		}
		if p := (*permanent)(nil); errors.As(err, &p) {
			return fmt.Errorf("%s: %w", what, p.err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: not within %v: %w", what, settleTimeout, err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}
