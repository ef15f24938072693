// Package ratelimit limits how often callers may call tools — per tenant,
// per identity, per tool, or any combination — with limits that every
// replica of the handler shares through the session store's Redis, or,
// for a single process, in memory.
//
// A [Limiter] is a ready [mcphandler.BeforeCallFunc] policy, built with
// [Limiter.Policy] around the host's own:
//
//	limits, err := ratelimit.New(ratelimit.Options{Redis: store}, // nil: in memory
//		ratelimit.Limit{Name: "identity", By: ratelimit.BySubject, Rate: 5},
//		ratelimit.Limit{Name: "tenant", By: ratelimit.ByTenant, Rate: 50, Burst: 100},
//		ratelimit.Limit{Name: "export", By: ratelimit.ByTenant | ratelimit.ByTool, Rate: 1, Period: time.Minute,
//			Match: func(c *mcphandler.ToolCall) bool { return c.Tool.Name == "export" }},
//	)
//	if err != nil { ... }
//	cfg.BeforeCall = mcphandler.ConfirmDestructive(limits.Policy(policy))
//
// # The limits
//
// Each [Limit] is a GCRA (generic cell rate algorithm): a leaky bucket
// that keeps one time per bucket. A limit of Rate calls per Period with
// Burst admits, in each of its buckets, Burst calls at once and then one
// call every Period/Rate; over any interval of length W it admits at most
// Burst + W·Rate/Period calls. A refused call consumes nothing, and is
// told how long until a call would be admitted. [Limit.By] names the
// buckets: one per tenant, per identity (tenant and subject), per tool,
// or per combination; zero is one bucket for every call.
//
// With [Options.Redis], the buckets are in the store's Redis, where every
// replica using the same Redis and Prefix shares them: each limit of each
// call is one round trip, a Lua script of github.com/go-redis/redis_rate
// that reads and advances the bucket atomically and takes the time from
// Redis's own clock, so replicas' clocks do not matter. Without, they are
// in the process's memory, with the same arithmetic.
//
// # What counts
//
// Every tools/call that reaches BeforeCall counts once against each limit
// that applies to it ([Limit.Match]), through whichever revision, session,
// transport or replica it came: buckets are named by tenant, subject and
// tool, never by session or connection, so a caller cannot start afresh
// by opening a new session, speaking 2026-07-28 instead of 2025 or the
// legacy HTTP+SSE transport, or reaching another replica. A 2026-07-28
// retry (the call again, with inputResponses) is a tools/call too, and
// counts. What never reaches BeforeCall — a hidden or unknown tool,
// invalid arguments, a missing scope — never counts.
//
// The limits of a Limiter are checked in order, and the first that
// refuses ends the check: the limits before it have counted the call. Put
// the narrowest first (identity before tenant), so that a caller over its
// own limit does not use up its tenant's.
//
// # Confirms and the host's policy
//
// The handler asks a human only after BeforeCall returned
// [mcphandler.Confirm], so limits.Policy(mcphandler.ConfirmDestructive(p))
// and mcphandler.ConfirmDestructive(limits.Policy(p)) are the same
// policy: the limits are checked first, and a rate-limited call never
// asks a human. That is the recommended order. A call the limits admitted
// and the human then declined, or did not answer, has counted: limits
// count calls asked for, not calls run, which also bounds how often a
// caller can make a human be asked. Within Policy the limits come before
// next, so calls that next denies count too; a host that wants them not
// to count calls Policy(nil) from its own policy after its own checks.
//
// # Refusals on the wire
//
// A call over a limit is refused with JSON-RPC error -32000
// ([mcphandler.CodeRateLimited]), whose data tells how long to wait and
// which limit applied — its name, rate, period in milliseconds and burst,
// never a key, a tenant or a count of anyone's calls:
//
//	{"code":-32000,"message":"Rate limited",
//	 "data":{"limit":{"name":"tenant","rate":10,"periodMs":1000,"burst":10},"retryAfterMs":87}}
//
// A retry after retryAfterMs is admitted, unless other calls of the same
// bucket came first.
//
// # When Redis is unreachable
//
// Each limit chooses what happens to a call it cannot check (Redis down,
// frozen, or answering with an error). By default it fails closed: the
// call is refused with -32000, the message "Rate limited: the limit cannot
// be checked now" and retryAfterMs 1000, because what a client should do
// is what it does for any rate limit — wait, then retry — rather than give
// up as for -32603. With [Limit.FailOpen] the call is admitted as if the
// limit were not there. Either way the limiter logs it, at most once per
// 10 s with the number of calls since, and answers fast: each Redis call
// is bounded by [Options.Timeout] (200 ms) and goes through the store's
// circuit breaker ([redisstore.Store.Do]), so once the breaker is open
// calls are decided in microseconds, without touching the network, until
// Redis answers again; limiting then resumes by itself.
//
// What a bucket's key holds in Redis is input like a client's: something
// else with write access to Redis may put anything there. A value that is
// not a number (garbage, a key of another Redis type) is a limit that
// cannot be checked, as above, and does not count for the breaker; a
// number is a time, which may refuse the bucket's calls (or, long past,
// admit them), but a refusal never asks to wait longer than one interval
// (Period/Rate), the most the limit itself asks.
//
// # Keys and memory
//
// A bucket's Redis key is "rate:" + Prefix + "{" + id + "}" ("rate:" is
// redis_rate's own), one Redis Cluster slot each. The id is the limit's
// name and then the bucket's tenant, subject and tool, each preceded by
// its length, so that no two buckets share an id whatever bytes names
// hold; an id over 128 bytes, or with bytes other than printable ASCII or
// with braces, is replaced by "#" and the base64 of its SHA-256. A key is
// thus "rate:", the prefix and at most 130 bytes, and expires once its
// bucket is full again (within Burst·Period/Rate plus a second). The in-memory
// limiter holds one entry of the same id per bucket that is not full, and
// drops full ones as it grows.
package ratelimit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/go-redis/redis_rate/v10"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/session/redisstore"
)

// By names what the buckets of a [Limit] are per. Combine them with |.
type By uint8

const (
	// ByTenant: a bucket per tenant ([mcphandler.Identity.Tenant]).
	ByTenant By = 1 << iota
	// BySubject: a bucket per identity, the subject within its tenant
	// (it implies ByTenant: two tenants' subjects of the same name are
	// two identities).
	BySubject
	// ByTool: a bucket per tool name.
	ByTool
)

// Limit is one rate limit of a [Limiter].
type Limit struct {
	// Name tells the limit's buckets apart from other limits' in Redis and
	// memory, and is sent to a refused client as data.limit.name. It is
	// required, unique within a Limiter, at most 64 bytes, and should be
	// the same on every replica for the same limit.
	Name string
	// By says what the buckets are per. Zero is one bucket for all calls
	// (a global limit, which one tenant can use up for every other).
	By By
	// Rate is how many calls a bucket admits per Period, in the long run.
	// It must be positive.
	Rate int
	// Period is the period of Rate. If zero, a second.
	Period time.Duration
	// Burst is how many calls a full bucket admits at once. If zero, Rate.
	Burst int
	// Match, if non-nil, restricts the limit to the calls for which it
	// returns true (a tool, a plan, a role). It runs on every call, on
	// the request's goroutine, and must be cheap.
	Match func(call *mcphandler.ToolCall) bool
	// FailOpen admits a call whose bucket cannot be checked (Redis
	// unreachable or failing) as if this limit were not there. If false,
	// the default, such a call is refused with -32000 and retryAfterMs
	// 1000 (see the package documentation).
	FailOpen bool
}

// Options configures a [Limiter]. The zero value keeps the buckets in
// memory.
type Options struct {
	// Redis, if non-nil, keeps the buckets in the Redis of this store, so
	// that every replica with the same Redis and Prefix shares them; its
	// client, OpTimeout and circuit breaker serve the limiter too (see
	// [redisstore.Store.Do]). If nil, the buckets are in this process's
	// memory and limit this process alone.
	Redis *redisstore.Store
	// Prefix starts the limiter's Redis keys, after redis_rate's "rate:".
	// Give every application sharing a Redis its own. It should not
	// contain '{' or '}'. Default "mcph:rl:".
	Prefix string
	// Timeout bounds each Redis call of the limiter, at most the store's
	// OpTimeout; a call that takes longer counts as a failure of Redis.
	// Default 200ms.
	Timeout time.Duration
	// Logger receives the notices of calls whose limits could not be
	// checked. If nil, slog.Default().
	Logger *slog.Logger
}

// Default option values.
const (
	DefaultPrefix  = "mcph:rl:"
	DefaultTimeout = 200 * time.Millisecond
)

// unavailableRetry is the retryAfterMs of a call refused because its limit
// could not be checked: about when the store's breaker probes Redis again.
const unavailableRetry = time.Second

// maxNameLen bounds Limit.Name.
const maxNameLen = 64

// Limiter checks calls against its limits. Create it with [New]; it is
// safe for concurrent use, holds no goroutine and needs no Close.
type Limiter struct {
	limits []limit
	be     backend
	log    *slog.Logger
}

// limit is a Limit validated, with what each call needs precomputed.
type limit struct {
	name     string
	by       By
	match    func(*mcphandler.ToolCall) bool
	failOpen bool
	rl       redis_rate.Limit
	interval time.Duration   // Period / Rate
	offset   time.Duration   // interval × Burst
	data     json.RawMessage // {"limit":{…}}
	notice   *notice         // of the calls it could not check
}

// backend keeps the buckets: in memory or in Redis.
type backend interface {
	// allow counts one call against the bucket id of lim, and reports
	// whether it was admitted and, if not, when one would be.
	allow(ctx context.Context, id string, lim *limit) (ok bool, retryAfter time.Duration, err error)
}

// New returns a Limiter that checks every call against limits, in order.
// It returns an error for a limit without a name, with a name used twice
// or longer than 64 bytes, an unknown By, a Rate, Period or Burst that is
// negative, a zero Rate, or a Period/Rate below a nanosecond.
func New(opts Options, limits ...Limit) (*Limiter, error) {
	l := &Limiter{log: opts.Logger}
	if l.log == nil {
		l.log = slog.Default()
	}
	seen := map[string]bool{}
	for i, in := range limits {
		lim, err := newLimit(in)
		if err != nil {
			return nil, fmt.Errorf("ratelimit: limit %d (%q): %w", i, in.Name, err)
		}
		if seen[lim.name] {
			return nil, fmt.Errorf("ratelimit: limit %d: the name %q is used twice", i, in.Name)
		}
		seen[lim.name] = true
		l.limits = append(l.limits, lim)
	}
	if opts.Redis == nil {
		l.be = newMemory()
		return l, nil
	}
	if opts.Prefix == "" {
		opts.Prefix = DefaultPrefix
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	l.be = &redisBackend{st: opts.Redis, prefix: opts.Prefix, timeout: opts.Timeout}
	return l, nil
}

func newLimit(in Limit) (limit, error) {
	if in.Period == 0 {
		in.Period = time.Second
	}
	if in.Burst == 0 {
		in.Burst = in.Rate
	}
	switch {
	case in.Name == "":
		return limit{}, errors.New("a name is required")
	case len(in.Name) > maxNameLen:
		return limit{}, fmt.Errorf("the name is longer than %d bytes", maxNameLen)
	case in.By&^(ByTenant|BySubject|ByTool) != 0:
		return limit{}, fmt.Errorf("unknown By %#x", in.By)
	case in.Rate <= 0 || in.Period < 0 || in.Burst < 0:
		return limit{}, errors.New("Rate must be positive, Period and Burst not negative")
	}
	interval := in.Period / time.Duration(in.Rate)
	if interval <= 0 {
		return limit{}, errors.New("Period/Rate is below a nanosecond")
	}
	if time.Duration(in.Burst) > (1<<62)/interval {
		return limit{}, errors.New("Burst×Period/Rate is too long")
	}
	lim := limit{
		name: in.Name, by: in.By, match: in.Match, failOpen: in.FailOpen,
		rl:       redis_rate.Limit{Rate: in.Rate, Burst: in.Burst, Period: in.Period},
		interval: interval, offset: interval * time.Duration(in.Burst),
		notice: new(notice),
	}
	var err error
	lim.data, err = json.Marshal(struct {
		Limit info `json:"limit"`
	}{info{in.Name, in.Rate, in.Period.Milliseconds(), in.Burst}})
	return lim, err
}

// info is data.limit of a refusal.
type info struct {
	Name     string `json:"name"`
	Rate     int    `json:"rate"`
	PeriodMs int64  `json:"periodMs"`
	Burst    int    `json:"burst"`
}

// Policy returns a BeforeCall policy that checks the call against the
// limits and, if none refuses it, defers to next (Allow when nil). A call
// over a limit, or whose limit fails closed, gets a
// [mcphandler.RateLimit] decision with the limit in its Data, and next
// does not run. See the package documentation for how it composes with
// [mcphandler.ConfirmDestructive].
func (l *Limiter) Policy(next mcphandler.BeforeCallFunc) mcphandler.BeforeCallFunc {
	return func(ctx context.Context, call *mcphandler.ToolCall) (mcphandler.Decision, error) {
		if d, refused := l.check(ctx, call); refused {
			return d, nil
		}
		if next == nil {
			return mcphandler.Allow(), nil
		}
		return next(ctx, call)
	}
}

// check counts call against each limit that applies, in order, until one
// refuses it.
func (l *Limiter) check(ctx context.Context, call *mcphandler.ToolCall) (mcphandler.Decision, bool) {
	var buf [maxRawID]byte
	for i := range l.limits {
		lim := &l.limits[i]
		if lim.match != nil && !lim.match(call) {
			continue
		}
		ok, retry, err := l.be.allow(ctx, bucketID(buf[:0], lim, call), lim)
		switch {
		case err == nil && ok:
			continue
		case err == nil:
			return refusal(lim, "Rate limited", retry), true
		case ctx.Err() != nil:
			// The caller gave up: nothing to admit, nothing to log.
			return refusal(lim, "Rate limited: the limit cannot be checked now", unavailableRetry), true
		}
		lim.notice.log(l.log, lim, err)
		if !lim.failOpen {
			return refusal(lim, "Rate limited: the limit cannot be checked now", unavailableRetry), true
		}
	}
	return mcphandler.Decision{}, false
}

func refusal(lim *limit, msg string, retry time.Duration) mcphandler.Decision {
	d := mcphandler.RateLimit(msg, max(retry, time.Millisecond))
	d.Data = lim.data
	return d
}

// noticeEvery is how often the limiter logs calls whose limits it could
// not check.
const noticeEvery = 10 * time.Second

// notice logs the failures to check one limit at most once per
// noticeEvery, with the number of calls since the last notice.
type notice struct {
	mu   sync.Mutex // guards next and n
	next time.Time
	n    int
}

func (nc *notice) log(log *slog.Logger, lim *limit, err error) {
	now := time.Now()
	nc.mu.Lock()
	nc.n++
	if now.Before(nc.next) {
		nc.mu.Unlock()
		return
	}
	n := nc.n
	nc.n, nc.next = 0, now.Add(noticeEvery)
	nc.mu.Unlock()
	what := "refused (fail-closed)"
	if lim.failOpen {
		what = "admitted without it (fail-open)"
	}
	log.Warn("ratelimit: cannot check a limit; calls "+what, "limit", lim.name, "calls", n, "err", err)
}
