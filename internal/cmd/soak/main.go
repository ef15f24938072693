// Command soak is the load driver of scripts/soak.sh: for -minutes
// minutes it runs a steady mix of every kind of request (see kinds in
// scenarios.go) against two replicas of internal/cmd/soakserver sharing
// one Redis, at -rate operations a second on at most -workers at once,
// with the fixed demo identities of three tenants. What crosses replicas
// does so on purpose: a confirm asked on one replica is answered through
// the other, a 2026-07-28 round is retried on the other, a task is polled
// there, a session is deleted there, and approvals are decided in the
// approval store directly, as the approval page would (half of them; the
// other half are left to expire).
//
// Every -sample it reads Redis's DBSIZE and used_memory, and each
// replica's goroutines (its /debug/soak), VmRSS (/proc/PID/status) and
// open files (/proc/PID/fd); each minute it prints a row of the medians of
// that minute's samples, with the operations that ended in it, and writes
// the same to -csv. After -warmup minutes each figure must stay flat: the
// last minute's against the last warm-up minute's, within the tolerances
// printed at the start (tolerances in report.go). An operation that ends
// with an error the soak does not cause on purpose (an approval left to
// expire and a client hanging up are on purpose, and counted apart) fails
// the run too. It exits 0 when every figure stayed within its tolerance
// and no operation failed unexpectedly, 1 otherwise, 2 on a usage error.
//
// -free-port prints a free loopback TCP port and exits, for the script to
// start redis-server on.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mcphandler/mcphandler/approval"
	"github.com/mcphandler/mcphandler/session/redisstore"
)

// config is the command line.
type config struct {
	a, b, debugA, debugB       string // host:port
	redisURL, prefix, stateKey string
	minutes, warmup, workers   int
	rate                       float64
	minute, sampleEvery        time.Duration
	opTimeout                  time.Duration
	csvPath, kinds             string
}

func main() {
	var cfg config
	freePort := flag.Bool("free-port", false, "print a free loopback TCP port and exit")
	flag.StringVar(&cfg.a, "a", "", "host:port of replica A's MCP endpoint")
	flag.StringVar(&cfg.b, "b", "", "host:port of replica B's MCP endpoint")
	flag.StringVar(&cfg.debugA, "debug-a", "", "host:port of replica A's debug endpoint")
	flag.StringVar(&cfg.debugB, "debug-b", "", "host:port of replica B's debug endpoint")
	flag.StringVar(&cfg.redisURL, "redis", "", "URL of the replicas' Redis")
	flag.StringVar(&cfg.prefix, "prefix", "mcph-soak:", "the replicas' key prefix in Redis")
	flag.StringVar(&cfg.stateKey, "state-key", os.Getenv("MCP_STATE_KEY"), "the replicas' state key (default $MCP_STATE_KEY)")
	flag.IntVar(&cfg.minutes, "minutes", 60, "minutes of load")
	flag.IntVar(&cfg.warmup, "warmup", -1, "minutes of warm-up, not judged (default max(2, minutes/6))")
	flag.IntVar(&cfg.workers, "workers", 16, "operations at most at once")
	flag.Float64Var(&cfg.rate, "rate", 8, "operations started per second")
	flag.DurationVar(&cfg.minute, "minute", time.Minute, "the length of a minute (shorter only for tests)")
	flag.DurationVar(&cfg.sampleEvery, "sample", 5*time.Second, "how often the figures are read")
	flag.DurationVar(&cfg.opTimeout, "op-timeout", 30*time.Second, "how long one operation may take")
	flag.StringVar(&cfg.csvPath, "csv", "", "the CSV file of the minutes (required)")
	flag.StringVar(&cfg.kinds, "kinds", "", "only these kinds of operation, comma-separated (default all; to look into one)")
	flag.Parse()
	if *freePort {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			fmt.Fprintln(os.Stderr, "soak:", err)
			os.Exit(1)
		}
		fmt.Println(l.Addr().(*net.TCPAddr).Port)
		l.Close()
		return
	}
	if cfg.warmup < 0 {
		cfg.warmup = max(2, cfg.minutes/6)
	}
	if err := cfg.check(); err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		flag.Usage()
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	r, err := soak(ctx, cfg, os.Stdout, os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		os.Exit(1)
	}
	if len(r.failed) > 0 {
		os.Exit(1)
	}
}

func validKinds(only string) bool {
	_, err := weights(only)
	return err == nil
}

func (c config) check() error {
	switch {
	case c.a == "" || c.b == "" || c.debugA == "" || c.debugB == "":
		return errors.New("-a, -b, -debug-a and -debug-b are required")
	case c.redisURL == "":
		return errors.New("-redis is required")
	case len(c.stateKey) < 32:
		return errors.New("-state-key must be at least 32 bytes")
	case c.csvPath == "":
		return errors.New("-csv is required")
	case c.minutes < 1 || c.warmup < 1 || c.warmup >= c.minutes:
		return fmt.Errorf("-warmup %d must be at least 1 and less than -minutes %d", c.warmup, c.minutes)
	case !validKinds(c.kinds):
		return fmt.Errorf("-kinds %q: not a list of kinds", c.kinds)
	case c.workers < 1 || c.rate <= 0 || c.minute <= 0 || c.sampleEvery <= 0 || c.sampleEvery > c.minute:
		return errors.New("-workers, -rate, -minute and -sample must be positive, -sample at most -minute")
	}
	return nil
}

// driver runs operations and counts how they ended.
type driver struct {
	transport *http.Transport
	approvals *approval.Store
	timeout   time.Duration
	sent      atomic.Int64 // HTTP requests
	skipped   atomic.Int64
	state     []kindState // per kind
	schedule  []int       // indexes of kinds, each as often as its weight
	next      int
	addrs     [2]string
	errOut    io.Writer
	errMu     sync.Mutex
	start     time.Time
}

// kindState is what the driver keeps per kind.
type kindState struct {
	n                        atomic.Int64 // operations started
	ok, expected, unexpected atomic.Int64
}

func (k *kindState) counts() counts {
	return counts{k.ok.Load(), k.expected.Load(), k.unexpected.Load()}
}

// shown is how many unexpected errors of one kind are printed.
const shown = 5

// interleave returns the indexes of weights, each as many times as its
// weight, spread evenly (smooth weighted round robin).
func interleave(weights []int) []int {
	total := 0
	for _, w := range weights {
		total += w
	}
	cur := make([]int, len(weights))
	out := make([]int, 0, total)
	for range total {
		best := -1
		for i, w := range weights {
			cur[i] += w
			if w > 0 && (best < 0 || cur[i] > cur[best]) {
				best = i
			}
		}
		cur[best] -= total
		out = append(out, best)
	}
	return out
}

// weights returns the weight of each kind, 0 for those only leaves out
// (a comma-separated list of names; "" for all).
func weights(only string) ([]int, error) {
	w := make([]int, len(kinds))
	for i, k := range kinds {
		w[i] = k.weight
	}
	if only == "" {
		return w, nil
	}
	chosen := make([]int, len(kinds))
	for name := range strings.SplitSeq(only, ",") {
		i := slices.IndexFunc(kinds, func(k kind) bool { return k.name == name })
		if i < 0 {
			return nil, fmt.Errorf("-kinds: no kind %q", name)
		}
		chosen[i] = w[i]
	}
	return chosen, nil
}

// nextOp returns the kind and op of the next operation of the schedule.
func (d *driver) nextOp() (int, op) {
	k := d.schedule[d.next%len(d.schedule)]
	d.next++
	n := d.state[k].n.Add(1) - 1
	home, other := d.addrs[0], d.addrs[1]
	if n%2 == 1 {
		home, other = other, home
	}
	return k, op{n: n, home: home, other: other, who: callers[(n/4)%int64(len(callers))]}
}

// do runs one operation and counts how it ended.
func (d *driver) do(k int, o op) {
	ctx, cancel := context.WithTimeout(context.Background(), d.timeout)
	defer cancel()
	err := kinds[k].run(d, ctx, o)
	st := &d.state[k]
	var ee expectedError
	switch {
	case err == nil:
		st.ok.Add(1)
	case errors.As(err, &ee):
		st.expected.Add(1)
	default:
		if n := st.unexpected.Add(1); n <= shown {
			d.errMu.Lock()
			fmt.Fprintf(d.errOut, "soak: %s unexpected error (op %d, %s -> %s, %s) at %s: %v\n", kinds[k].name, o.n, o.home, o.other,
				o.who.token, time.Since(d.start).Round(time.Second), err)
			if n == shown {
				fmt.Fprintf(d.errOut, "soak: %s: further unexpected errors are only counted\n", kinds[k].name)
			}
			d.errMu.Unlock()
		}
	}
}

func (d *driver) snapshot() []counts {
	out := make([]counts, len(d.state))
	for i := range d.state {
		out[i] = d.state[i].counts()
	}
	return out
}

func minus(a, b []counts) []counts {
	out := make([]counts, len(a))
	for i := range a {
		out[i] = counts{a[i].OK - b[i].OK, a[i].Expected - b[i].Expected, a[i].Unexpected - b[i].Unexpected}
	}
	return out
}

// result is what a soak measured and how it ended.
type result struct {
	rows   []row    // minute 0 (before the load), then one per minute
	kinds  []counts // per kind, the whole run
	http   int64
	failed []string // why the run failed; none if it passed
}

func (r *result) total() counts {
	var t counts
	for _, c := range r.kinds {
		t = t.plus(c)
	}
	return t
}

// soak runs the whole soak, printing the table to out and the unexpected
// errors to errOut as they happen.
func soak(ctx context.Context, cfg config, out, errOut io.Writer) (*result, error) {
	opts, err := redis.ParseURL(cfg.redisURL)
	if err != nil {
		return nil, fmt.Errorf("-redis: %w", err)
	}
	rc := redis.NewClient(opts)
	defer rc.Close()
	st := redisstore.New(rc, redisstore.Options{Prefix: cfg.prefix})
	defer st.Close()
	approvals, err := approval.New(approval.Config{Store: st, Keys: [][]byte{[]byte(cfg.stateKey)},
		URL: "https://approvals.soak.invalid/approvals/", Roles: []string{"viewer", "editor", "admin"}})
	if err != nil {
		return nil, err
	}
	defer approvals.Close()
	tr := &http.Transport{MaxIdleConns: 4 * cfg.workers, MaxIdleConnsPerHost: cfg.workers, IdleConnTimeout: 90 * time.Second}
	defer tr.CloseIdleConnections()
	w, err := weights(cfg.kinds)
	if err != nil {
		return nil, err
	}
	d := &driver{transport: tr, approvals: approvals, timeout: cfg.opTimeout, state: make([]kindState, len(kinds)),
		schedule: interleave(w), addrs: [2]string{cfg.a, cfg.b}, errOut: errOut}
	sm := &sampler{redis: rc, debug: [2]string{cfg.debugA, cfg.debugB}, hc: &http.Client{Timeout: 5 * time.Second}}
	if err := ready(ctx, cfg); err != nil {
		return nil, err
	}
	f, err := os.Create(cfg.csvPath)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	csvw, err := newCSV(f)
	if err != nil {
		return nil, err
	}
	preamble(out, cfg)
	first, err := sm.sample(ctx)
	if err != nil {
		return nil, err
	}
	r := &result{rows: []row{{Minute: 0, Fig: first, Kinds: make([]counts, len(kinds))}}}
	fmt.Fprintln(out, tableHeader())
	fmt.Fprintln(out, tableRow(r.rows[0]))
	if err := csvw.write(csvRecord(r.rows[0])); err != nil {
		return nil, err
	}
	if err := d.load(ctx, cfg, sm, func(w row) error {
		r.rows = append(r.rows, w)
		fmt.Fprintln(out, tableRow(w))
		return csvw.write(csvRecord(w))
	}); err != nil {
		r.failed = append(r.failed, err.Error())
	}
	r.kinds, r.http = d.snapshot(), d.sent.Load()
	summary(out, cfg, d, r)
	r.judge(out, cfg)
	return r, nil
}

// preamble says what the run does and what it checks.
func preamble(out io.Writer, cfg config) {
	fmt.Fprintf(out, "soak: %d minutes (%d of warm-up), %g operations/s on at most %d workers; replicas A %s, B %s\n",
		cfg.minutes, cfg.warmup, cfg.rate, cfg.workers, cfg.a, cfg.b)
	fmt.Fprintf(out, "each row: the medians of the figures sampled every %v in that minute; operations that ended in it\n", cfg.sampleEvery)
	fmt.Fprintf(out, "after the warm-up, minute %d is checked against minute %d:\n", cfg.minutes, cfg.warmup)
	for _, t := range tolerances {
		fmt.Fprintf(out, "  %-18s %s\n", t.name, t)
	}
	fmt.Fprintln(out, "  unexpected errors  none (an approval left to expire and a client hanging up are expected)")
	fmt.Fprintln(out)
}

// load runs the operations for cfg.minutes minutes, at cfg.rate on at
// most cfg.workers, and hands each minute's row to minute as it ends. It
// returns once every operation it started ended: an error if it was
// interrupted or could not sample the figures.
func (d *driver) load(ctx context.Context, cfg config, sm *sampler, minute func(row) error) error {
	d.start = time.Now()
	type job struct {
		k int
		o op
	}
	jobs := make(chan job)
	var workers sync.WaitGroup
	for range cfg.workers {
		workers.Go(func() {
			for j := range jobs {
				d.do(j.k, j.o)
			}
		})
	}
	defer workers.Wait()
	defer close(jobs)
	samples := make(chan figures)
	sampleErr := make(chan error, 1)
	sampling, stopSampling := context.WithCancel(ctx)
	var sampler sync.WaitGroup
	sampler.Go(func() { sm.every(sampling, cfg.sampleEvery, samples, sampleErr) })
	defer sampler.Wait()
	defer stopSampling()

	tick := time.NewTicker(time.Duration(float64(time.Second) / cfg.rate))
	defer tick.Stop()
	next := time.NewTimer(cfg.minute)
	defer next.Stop()
	var (
		minuteSamples []figures
		prev          = d.snapshot()
		prevSent      int64
		prevSkipped   int64
	)
	for m := 1; m <= cfg.minutes; {
		select {
		case <-ctx.Done():
			return errors.New("interrupted")
		case err := <-sampleErr:
			return fmt.Errorf("sampling: %w", err)
		case <-tick.C:
			k, o := d.nextOp()
			select {
			case jobs <- job{k, o}:
			default:
				d.skipped.Add(1)
			}
		case f := <-samples:
			minuteSamples = append(minuteSamples, f)
		case <-next.C:
			now, sent, skipped := d.snapshot(), d.sent.Load(), d.skipped.Load()
			w := row{Minute: m, Warmup: m <= cfg.warmup, Fig: median(minuteSamples), Kinds: minus(now, prev),
				Skipped: skipped - prevSkipped, HTTP: sent - prevSent}
			prev, prevSent, prevSkipped, minuteSamples = now, sent, skipped, nil
			if err := minute(w); err != nil {
				return err
			}
			m++
			next.Reset(cfg.minute)
		}
	}
	return nil
}

// summary prints the operations of the whole run by kind.
func summary(out io.Writer, cfg config, d *driver, r *result) {
	fmt.Fprintln(out)
	fmt.Fprintln(out, "operations by kind, whole run (those still running at the last minute's end included):")
	fmt.Fprintf(out, "  %-12s %6s %6s %8s %10s  %s\n", "kind", "done", "ok", "expected", "unexpected", "what")
	for i, k := range kinds {
		c := r.kinds[i]
		fmt.Fprintf(out, "  %-12s %6d %6d %8d %10d  %s\n", k.name, c.done(), c.OK, c.Expected, c.Unexpected, k.what)
	}
	t := r.total()
	fmt.Fprintf(out, "  %-12s %6d %6d %8d %10d\n", "all", t.done(), t.OK, t.Expected, t.Unexpected)
	fmt.Fprintf(out, "HTTP requests %d; operations skipped because every worker was busy: %d\n", r.http, d.skipped.Load())
	fmt.Fprintln(out, "CSV:", cfg.csvPath)
	fmt.Fprintln(out)
}

// judge checks the figures and the errors, and prints the verdict.
func (r *result) judge(out io.Writer, cfg config) {
	if len(r.rows) == cfg.minutes+1 {
		fmt.Fprintf(out, "figures, minute %d against minute %d (the end of the warm-up):\n", cfg.minutes, cfg.warmup)
		for _, v := range judge(r.rows[cfg.warmup].Fig, r.rows[cfg.minutes].Fig) {
			fmt.Fprintln(out, "  "+v.String())
			if !v.ok {
				r.failed = append(r.failed, v.tol.name+" grew")
			}
		}
		if r.rows[cfg.minutes].total().done() == 0 {
			r.failed = append(r.failed, "no operation ended in the last minute")
		}
	}
	if n := r.total().Unexpected; n > 0 {
		r.failed = append(r.failed, fmt.Sprintf("%d unexpected errors", n))
	}
	if len(r.failed) > 0 {
		fmt.Fprintln(out, "FAIL:", strings.Join(r.failed, "; "))
		return
	}
	fmt.Fprintln(out, "PASS")
}

// ready waits until both replicas answer /ready.
func ready(ctx context.Context, cfg config) error {
	hc := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(30 * time.Second)
	for _, addr := range []string{cfg.a, cfg.b} {
		for {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/ready", nil)
			resp, err := hc.Do(req)
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					break
				}
				err = errors.New(resp.Status)
			}
			if time.Now().After(deadline) || ctx.Err() != nil {
				return fmt.Errorf("replica %s is not ready: %v", addr, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return nil
}
