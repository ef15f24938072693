// Package redisstore is a [session.Store] kept in Redis, so that several
// replicas of the handler can share sessions, messages, confirms and event
// logs and any replica can serve any request.
//
// # What is stored where
//
// With the default prefix "mcph:", a [Store] holds:
//
//	mcph:{<session id>}:s  string  one session record (see below); it lives
//	                               for the session's TTL (session.DefaultTTL
//	                               when zero), and Get and Update restart
//	                               that TTL.
//	mcph:{<key>}:r         string  a record of PutIfAbsent/CompareAndSwap;
//	                               it lives for the ttl of the call that last
//	                               wrote it.
//	mcph:{<stream>}:l      list    the event log of a resumable stream, one
//	                               element per event (element i is sequence
//	                               number i+1); it lives for the ttl of the
//	                               last AppendEvent.
//	mcph:{owner/<owner>}:o list    the ids of an owner's admitted sessions,
//	                               oldest first, at most the max of Admit;
//	                               it lives as long as the newest session's
//	                               TTL.
//	mcph:<channel>         -       a Pub/Sub channel: nothing is stored, a
//	                               message published with no subscriber is
//	                               lost. On a Redis Cluster the channel is
//	                               mcph:{ps<n>}<channel>, a shard channel
//	                               (see "Topologies").
//	mcph:store/probe/<id>  -       a channel only this store's connection
//	                               subscribes (mcph:{ps<n>}store/probe/<id>,
//	                               one per shard, on a cluster).
//
// Every key is written together with its expiry in one command or script
// (SET ... PX, a Lua script, or MULTI/EXEC), so no key ever exists without
// a TTL and nothing grows without bound. The part in braces is the Redis
// Cluster hash tag: whatever is named after one session id, record key or
// stream lives in one slot, and every command, script and transaction of
// the store touches the key of one name only, so none is ever refused
// with CROSSSLOT.
//
// A session record is a compact binary encoding: a version byte (2), an
// ASCII header "<ttl ms>:<length of the immutable part>:", the immutable
// part (the owner) and then the fields Update replaces (protocol version,
// client info, capabilities, TTL, initialized, log level, subscriptions).
// Capabilities are kept by name ("elicitation.form", "elicitation.url",
// "sampling", "sampling.tools", "roots", "roots.listChanged"), never by
// the values of the session.Capabilities constants, so a record means the
// same to every release; a name this release does not know (written by a
// newer one) is ignored. The header lets Get and Update restart the TTL
// and keep the owner without decoding the rest: Get reads a record with
// GETEX PX and the TTL the store saw last, and only a record whose header
// gives another TTL is read again by a Lua script that restarts it from
// the header (Redis before 6.2, without GETEX, gets the script every
// time); Update is a Lua script. Every
// write of a record is a single command or script, so Redis never holds a
// half-written record; a record that still fails to decode (written by an
// incompatible version, or by something else under the same prefix) reads
// as [session.ErrNotFound].
//
// Records of version 1, written by earlier releases, are read too: they
// differ only in holding the capabilities as bits. A rolling upgrade
// therefore keeps every session: Get serves a version-1 record and
// restarts its TTL, and Update rewrites it as version 2, owner kept.
// Earlier releases do not read version 2: while they still run, a session
// created (or updated) by an upgraded replica reads as unknown on them, and
// its client initializes again.
//
// # Cost per call
//
// Every method but Subscribe is exactly one round trip to Redis: Create is
// SET NX PX, Get and Update are Lua scripts (EVALSHA, falling back to EVAL
// once per server when the script is not cached), Delete is DEL, Publish
// is PUBLISH (SPUBLISH on a cluster), PutIfAbsent is SET NX PX, Load is
// GET, CompareAndSwap is a Lua script, AppendEvent is MULTI RPUSH PEXPIRE
// EXEC in one pipeline, EventsAfter is LRANGE, Admit is a Lua script under
// the limit (see [Store.Admit] past it). With [Options.WaitReplicas],
// every write is followed by WAIT in the same pipeline. With
// [Options.AutoPipeline] the commands are the same, written to Redis in
// one batch with those of concurrent calls. Get is a script
// rather than GETEX because the
// lifetime to extend by is the session's own TTL, which is inside the
// record: the script reads it from the header and PEXPIREs by it, in the
// same round trip. Update is a script so that it keeps the stored owner,
// as the Store contract requires, atomically.
//
// # Consistency
//
// Without [Options.CacheTTL] the store is strictly consistent: every call
// reads or writes Redis itself, so a write that returned on any replica is
// seen by every call that starts after it, on any replica (a session
// deleted on one replica is unknown on every other at once). With
// [Options.AutoPipeline] the same commands go to Redis batched with those
// of concurrent calls; the consistency is the same, and so is the bound of
// OpTimeout on each call. With CacheTTL, Get may serve a copy from memory:
// until the eviction of a write elsewhere arrives (typically within a
// millisecond, at most CacheTTL), another replica may serve the old record.
// On Sentinel or a Cluster, a failover may lose writes that Redis had
// acknowledged (see "Topologies" and [Options.WaitReplicas]).
//
// go-redis's server-assisted client-side caching (ClientSideCacheConfig,
// RESP3 CLIENT TRACKING) is not used as a cache: go-redis documents it as
// eventually consistent, applying an invalidation when it next reads the
// connection that carries it, with MaxStaleness as the only bound; it
// caches plain reads, while a session read must also restart the
// session's TTL. Like CacheTTL it cannot be strictly consistent: a replica
// learns of a write elsewhere only when the invalidation arrives, so a
// strictly consistent read needs a round trip.
//
// # Pub/Sub, connections and goroutines
//
// Channel c of the Store interface is the Redis channel "<prefix>c" (on a
// cluster, with a hash tag: see "Topologies"). Publish uses the client's
// pool like every other call. The subscriptions of a Store share its
// Pub/Sub connections: one on a single server or behind Sentinel, one per
// shard of channels on a cluster (at most 16). Each is opened at the first
// Subscribe of one of its channels and read by one goroutine that the
// Store owns (its dispatcher); a connection is subscribed to a channel
// while at least one local subscription of it is open. When a connection
// breaks, its dispatcher reopens it with a capped backoff (50ms doubling
// to 1s) and go-redis resubscribes its channels; messages published
// meanwhile are lost (Redis Pub/Sub delivers at most once).
//
// A connection can also stay open on a server that no longer hears what
// the store's client publishes: an old master after a failover (Sentinel
// turns it into a replica, and drops its clients, only about ten seconds
// later), or one behind an address that moved. So, while the host holds
// subscriptions, the store checks each connection once a second: it
// publishes on a channel only that connection subscribes (its probe
// channel) and, if Redis counts no receiver, replaces the connection by a
// new one from the client, subscribed again to every channel. The check
// sends nothing while the circuit breaker is open and does not feed it; a
// connection replaced this way and found deaf again is checked half as
// often, down to every 30s, until a check passes.
//
// The Store owns these goroutines, and [Store.Close] stops all of them and
// waits for them: the dispatchers; the check of the connections, started
// by the host's first Subscribe; with [Options.CacheTTL], the cache's
// subscriber, started by the first Get, which subscribes to the eviction
// channel and confirms the subscription again after every loss of the
// connection, retrying with a capped backoff (50ms doubling to 1s) until it
// works; and, while the circuit breaker is open, its probe. None of them
// uses a caller's context: a request that gave up, or a Redis down at the
// first request, cannot disable them.
//
// # Topologies
//
// The client may be a *redis.Client of one server, a failover client of a
// master watched by Sentinels (redis.NewFailoverClient) or a
// *redis.ClusterClient of a Redis Cluster (Redis 7 or later, for sharded
// Pub/Sub). A redis.Ring is not supported.
//
// Single server: everything is as described above; if Redis restarts
// without persistence, what it held is gone (clients get 404 for their
// sessions and initialize again).
//
// Sentinel: the failover client asks the Sentinels for the master, dials
// it, and drops its pooled connections to the old master when they
// announce a new one, so calls go to the new master as soon as the client
// hears of the failover. The store's Pub/Sub connection moves when the old
// master drops it (it died, or the Sentinels reconfigure it), or within
// about a second when the check above finds it deaf.
//
// Cluster: keys are spread over the masters by their hash tags, and
// channels too: each channel gets one of 16 hash tags picked by a hash of
// its name (mcph:{ps<n>}<channel>; the tags' slots are spread evenly over
// the 16384) and is a shard channel, subscribed with SSUBSCRIBE on a
// connection to the master of its slot and published with SPUBLISH, which
// Redis delivers within that master's shard only (classic PUBLISH goes to
// every node of the cluster, and its receiver count is only that of the
// node that took it). Related channels share no slot on purpose: no Store
// call needs two channels, or a channel and a key, together, and a hash of
// the name spreads the load. A shard's connection is replaced, on the
// master the cluster names for its slot, when the node unsubscribes it (it
// lost the slot: a failover, a resharding), answers it with an error such
// as MOVED, or dies; or when the check above finds it deaf. go-redis
// reloads its slot map on MOVED, or every minute, but not when a node stops
// answering, so the store asks it to reload whenever a call fails for a
// network reason: the slots of a master that died are reached again as
// soon as its replica took over (about two seconds after the death with a
// cluster-node-timeout of one second).
//
// The count Publish returns is the number of subscribed connections of the
// server that took the message — the master, or on a cluster the master of
// the channel's slot, which is where the store keeps every connection —
// with this store's own connection replaced by its number of local
// subscribers. It is exact on every topology, except while a failover
// moves subscriptions to a new master: a replica still subscribed on the
// old one (for up to about a second behind Sentinel, less on a cluster) is
// neither reached nor counted, so 0 then does not prove that no replica
// waits on the channel.
//
// Failover and durability: Redis replicates asynchronously. A write the
// old master acknowledged but had not sent to the replica that takes over
// is lost, whatever the topology; behind Sentinel, so is a write the old
// master takes after the Sentinels promoted the replica and before the
// client heard of it. With [Options.WaitReplicas] every write of the store
// returns only once that many replicas acknowledged it (else it fails with
// session.ErrUnavailable), so a failover that promotes one of them keeps
// every write the store reported done: a claimed answer, a decided
// confirm, a used nonce stay decided. The price: a replica's round trip on
// every write, and writes fail while the master has fewer replicas in
// sync than that — after a failover, until the old master or another
// server is back as a replica (behind Sentinel about ten seconds after a
// SENTINEL FAILOVER; after a crash, until the dead server is restarted);
// give each master one replica more than WaitReplicas to keep writing
// through the loss of one server. Messages on channels are never stored,
// and one published during a failover may be lost.
//
// # Failures
//
// Every call is bounded by [Options.OpTimeout]. A network error, a timeout
// or an error reply from Redis is returned wrapped so that
// errors.Is(err, session.ErrUnavailable) holds (and errors.Is also matches
// the underlying error, such as context.DeadlineExceeded); the handler
// answers 503. What a key holds is never such a failure (see "Foreign
// values").
//
// When Redis stops answering, the first calls of the outage each wait
// until they fail: about 0.1s for a refused connection with the client
// settings below (1.3–1.8s with go-redis's defaults), OpTimeout for a
// Redis that accepts connections but answers nothing (a frozen process, a
// lost network). After
// [Options.BreakerThreshold] such failures in a row (default 5) the
// circuit breaker opens: every call fails at once with
// session.ErrUnavailable, without touching the network, so a request gets
// its 503 in microseconds and holds nothing meanwhile. While it is open,
// the store PINGs Redis, one PING at a time, 100ms after it opened and
// then backing off to once a second (BreakerMinBackoff,
// BreakerMaxBackoff); the first answer closes it, and calls go to Redis
// again. Only network failures and timeouts count: an error reply
// (WRONGTYPE, a script error, NOSCRIPT, which go-redis answers with EVAL
// by itself) shows Redis is up, and a call whose caller gave up says
// nothing about Redis. Subscriptions recover by themselves: go-redis
// resubscribes open ones when a dispatcher reconnects, whatever the
// breaker says. [Store.Do] runs another package's operations on the same
// client under the same breaker and bound (package ratelimit keeps its
// limits that way).
//
// # Foreign values
//
// What Redis returns is input like a client's: something else with write
// access to Redis (another application under the same prefix, an
// attacker holding the Redis password) may leave any value of any type
// at any key of the store. A value that does not decode is the store's
// business, never a failure of Redis: no call answers it with
// session.ErrUnavailable, none panics, and the circuit breaker does not
// count it.
//
// A key that holds another Redis type than the store writes there (a
// list, a hash, a set, a sorted set or a stream where a session record or
// a record is a string; a string or any of those where an event log or an
// owner's list is a list), on which Redis answers WRONGTYPE, reads as
// holding the empty value of the right type, which is the answer for
// undecodable bytes:
//
//   - Get and Update of a session: session.ErrNotFound, and Update writes
//     nothing, as for a record that does not decode. Create: the id is
//     taken. Delete deletes it.
//   - Load: the empty value, not session.ErrNotFound (the key exists:
//     PutIfAbsent does not write over it, as over any value), and
//     CompareAndSwap from the empty value replaces it; from any other
//     value it does not swap. A caller that reads a record, finds that it
//     does not decode and swaps it out therefore recovers from a key of
//     another type as from garbage bytes.
//   - EventsAfter: no events. AppendEvent replaces it by a new log, whose
//     first event is number 1, as after the log expired (one more round
//     trip, that time only).
//   - Admit: the owner has no session yet, and the list is replaced. A
//     list longer than the max of Admit plus 1024, which Admit never
//     makes, is replaced the same way, so that an Admit never checks or
//     ends more than that many sessions whatever the key held.
//
// A number that a value gives is passed to Redis only in a form Redis
// takes (the TTL in a session record's header: without leading zeros,
// and not at all when it is zero or longer than 18 digits, which no
// record has), and a script reply of a shape none of the scripts gives
// (nil, a string, an array where a number is expected) reads as a value
// the script could not parse. FuzzStoredSession checks that the scripts
// and the decoder agree on every value. Values that the store's callers
// write through PutIfAbsent and CompareAndSwap (the handler's signed
// records) are theirs to check: the store returns them as they are.
//
// # Client settings
//
// The store uses the go-redis client it is given as is (go-redis copies
// its options when the client is created, so they cannot be adjusted
// afterwards). Create it with:
//
//	redis.NewClient(&redis.Options{
//		Addr:                  addr,
//		ContextTimeoutEnabled: true,        // OpTimeout interrupts socket I/O
//		DialTimeout:           time.Second, // no more than OpTimeout
//		DialerRetries:         1,           // a refused dial fails at once
//	})
//
// ContextTimeoutEnabled lets OpTimeout (a context deadline) bound network
// waits; without it, the client's ReadTimeout, WriteTimeout and
// DialTimeout do. go-redis's default DialerRetries (5 attempts, 100ms
// apart) is repeated for each of the MaxRetries+1 attempts of a command,
// so a call to a Redis that refuses connections takes 1.3–1.8s to fail;
// with DialerRetries: 1 it fails in about 0.1s (the backoffs between the
// attempts of MaxRetries), and MaxRetries (default 3) still retries a
// command whose pooled connection was dropped on a new one. The breaker
// bounds what the defaults cost to the first BreakerThreshold calls of an
// outage, but those calls pay it in full.
//
// The same settings, for a cluster and for Sentinels:
//
//	redis.NewClusterClient(&redis.ClusterOptions{
//		Addrs:                 seedAddrs,
//		ContextTimeoutEnabled: true,
//		DialTimeout:           time.Second,
//		DialerRetries:         1,
//	})
//	redis.NewFailoverClient(&redis.FailoverOptions{
//		MasterName:            "mymaster",
//		SentinelAddrs:         sentinelAddrs,
//		ContextTimeoutEnabled: true,
//		DialTimeout:           time.Second,
//		DialerRetries:         1,
//	})
package redisstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mcphandler/mcphandler/session"
)

// Options configures a [Store]. The zero value is valid.
type Options struct {
	// Prefix starts every key and Pub/Sub channel name the store uses, so
	// that several stores (or other applications) can share one Redis.
	// It should not contain '{' or '}', which would change the Redis
	// Cluster hash tags. Default "mcph:".
	Prefix string

	// OpTimeout bounds every call of the store, the Pub/Sub commands of
	// Subscribe and Subscription.Close included, so that a dead Redis
	// fails a request instead of hanging it. It is applied as a context
	// deadline on top of the caller's context. go-redis lets a context
	// deadline interrupt socket I/O only when the client was created with
	// ContextTimeoutEnabled: true, so create it that way, or its own
	// ReadTimeout, WriteTimeout and DialTimeout bound the calls instead.
	// Also keep the client's DialTimeout no larger than OpTimeout: when
	// the Pub/Sub connection breaks, go-redis redials it under a lock that
	// Subscribe and Subscription.Close may then wait for. See "Client
	// settings" in the package documentation for the retries. Default 2s.
	OpTimeout time.Duration

	// CacheTTL, if positive, keeps the sessions a replica read in its
	// memory for up to CacheTTL (and at most a quarter of each session's
	// TTL), so that most requests of a live session need no Redis round
	// trip at all. Updates and deletes on any replica evict every
	// replica's copy through Pub/Sub, typically within a millisecond of
	// the write; until the eviction arrives another replica may still
	// serve the old record (a session just deleted elsewhere, a log level
	// just changed). Every replica sharing the prefix must set it, since
	// only stores with a cache publish evictions.
	//
	// The cache serves only while Redis has confirmed its subscription to
	// the evictions: until the first confirmation (the first Get waits for
	// the first attempt, within its context), and from the moment the
	// Pub/Sub connection is known lost until the subscription is confirmed
	// again on a new one, Get reads through to Redis, strictly consistent,
	// and a copy read before the loss is never served after it. A
	// connection that breaks silently is noticed when the operating
	// system reports it, so the staleness of a copy is bounded by CacheTTL
	// in any case. Zero, the default, reads Redis on every Get: strictly
	// consistent.
	CacheTTL time.Duration

	// BreakerThreshold is how many calls in a row must fail for a network
	// reason (a refused, reset or broken connection, a timeout) before the
	// store considers Redis down and opens its circuit breaker: from then
	// on every call fails at once with session.ErrUnavailable, sending
	// nothing, until a PING shows Redis answers again (see
	// BreakerMinBackoff). Error replies from Redis, calls whose caller
	// gave up, and calls after Close are not counted; a success resets the
	// count. Default 5; a negative value disables the breaker, so that
	// every call tries Redis and fails only when OpTimeout ends.
	BreakerThreshold int

	// BreakerMinBackoff and BreakerMaxBackoff schedule the PINGs of an
	// open breaker: the first is sent BreakerMinBackoff after it opened,
	// each one that fails doubles the wait, up to BreakerMaxBackoff, and
	// the first answer closes the breaker. There is at most one PING at a
	// time, each bounded by OpTimeout. Defaults 100ms and 1s.
	BreakerMinBackoff, BreakerMaxBackoff time.Duration

	// WaitReplicas, if positive, makes every write the store makes —
	// Create, Update, Delete, PutIfAbsent, CompareAndSwap, AppendEvent;
	// not the lifetime extension of Get — wait until at least
	// WaitReplicas replicas of the master that took it have acknowledged
	// it, so that a failover to one of them keeps it: the store sends
	// WAIT after the write, on the same connection, in the same round
	// trip. A write that fewer replicas acknowledged within WaitTimeout
	// fails with session.ErrUnavailable although the master applied it,
	// like a write whose answer was lost (a CompareAndSwap then reports
	// false, so the handler treats the transition as not made, and a
	// retry of AppendEvent may log the event twice); a write that changed
	// nothing (a SET NX, a swap or an update that did not happen) does not
	// fail for that. Such failures do not count for the circuit breaker:
	// Redis answered.
	//
	// The cost is the time a replica takes to acknowledge, about one
	// round trip between master and replica, added to every write; reads
	// are unaffected. Writes fail while the master has fewer replicas in
	// sync than WaitReplicas — after a failover, until the old master or
	// a new server is back as a replica. With as many replicas as
	// WaitReplicas, a failover promotes a replica that has every write
	// the store reported done, but one lost server stops the writes;
	// with one replica more, writes go on through the loss of a server,
	// and the Sentinels or the cluster promote the replica with the most
	// data, which has them unless it is the one that missed a write
	// another acknowledged. Zero, the default, does not wait: Redis
	// replicates asynchronously, and a write the old master acknowledged
	// but had not yet sent to the replica that takes over is lost (see
	// "Topologies" in the package documentation).
	WaitReplicas int

	// WaitTimeout bounds the wait of WaitReplicas. Default (and maximum)
	// half of OpTimeout.
	WaitTimeout time.Duration

	// AutoPipeline, if true, sends the single command or script of each
	// call (Create, Get, Update, Delete, PutIfAbsent, Load,
	// CompareAndSwap, EventsAfter; without WaitReplicas) through the
	// client's autopipeliner (go-redis's AutoPipeline, with the client's
	// AutoPipelineOptions or go-redis's defaults), which writes the
	// commands that concurrent calls issue at the same time to one pooled
	// connection in one batch and reads their replies together. Each call
	// still costs one round trip and sees what every call that returned
	// before it started wrote, on any replica, so consistency is the same
	// as without it. With 32 concurrent calls a Get costs about half the
	// CPU, in this process and in Redis, of one through the pool; a call
	// alone costs more (a hand-off to the autopipeliner's goroutine: about
	// 1.6 times the latency and twice the CPU), so it pays on a loaded
	// replica (BenchmarkGetConcurrent). OpTimeout still bounds every call:
	// the autopipeliner runs a queued command on a context of its own, so
	// the store stops waiting at the deadline, and the command may still
	// run, like one whose reply was lost. Publish, Subscribe, Admit, the
	// transaction of AppendEvent and every call with WaitReplicas use the
	// client directly. The autopipeliner is the client's, shared with its
	// other users and stopped when the client is closed; go-redis marks it
	// experimental. Works on one server, behind Sentinel and on a Cluster;
	// ignored on a client without one. Default false.
	AutoPipeline bool
}

// Default option values.
const (
	DefaultPrefix            = "mcph:"
	DefaultOpTimeout         = 2 * time.Second
	DefaultBreakerThreshold  = 5
	DefaultBreakerMinBackoff = 100 * time.Millisecond
	DefaultBreakerMaxBackoff = time.Second
)

// Store is a [session.Store] backed by Redis. Create it with [New]; it is
// safe for concurrent use.
//
// The first Subscribe opens a Pub/Sub connection shared by the store's
// subscriptions (one per shard of channels on a cluster) and starts a
// goroutine, owned by the Store, that reads it and dispatches messages,
// and another that checks the connections; with Options.CacheTTL the
// first Get starts the cache's subscriber, and an open circuit breaker
// runs its probe (see the package documentation). [Store.Close] stops
// them and closes the connections. A Store that never subscribed, never cached and
// never found Redis down holds no connection and no goroutine of its own.
// The Redis client is the caller's: the store never closes it, and it must
// stay open until Close returned.
type Store struct {
	c         redis.UniversalClient
	ap        *redis.AutoPipeliner // with Options.AutoPipeline: c's, for single commands
	prefix    string
	opTimeout time.Duration

	waitReplicas int64 // Options.WaitReplicas; 0: writes do not wait
	waitTimeout  time.Duration

	ps        pubsubState
	evictName string // the Redis channel of the cache's evictions
	br        breaker
	bg        group  // the breaker's probe and the cache's subscriber
	cache     *cache // nil unless Options.CacheTTL > 0
	ready     readiness

	// ttlHint is the TTL (ms) of the session record this store wrote or
	// read last, which Get restarts with GETEX; 0 while unknown, -1 when
	// Redis refused GETEX (see getRecord).
	ttlHint atomic.Int64
}

// Store implements session.Store, and so each of its parts.
var (
	_ session.Store    = (*Store)(nil)
	_ session.Sessions = (*Store)(nil)
	_ session.PubSub   = (*Store)(nil)
	_ session.Records  = (*Store)(nil)
	_ session.EventLog = (*Store)(nil)
)

// group runs the goroutines a Store owns besides the Pub/Sub dispatcher
// (the breaker's probe, the cache's subscriber), and waits for them at
// Close. They stop when the store's quit channel closes.
type group struct {
	mu     sync.Mutex // guards closed, and orders start before wait
	closed bool
	wg     sync.WaitGroup
}

// start runs f in a goroutine of the group, unless the group is closed;
// it reports whether it did.
func (g *group) start(f func()) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return false
	}
	g.wg.Go(f)
	return true
}

// close refuses new goroutines and waits for the running ones.
func (g *group) close() {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
	g.wg.Wait()
}

// New returns a Store that keeps its data in the Redis reached through c,
// which may be a single node (*redis.Client), a Sentinel failover client
// or a *redis.ClusterClient (see "Topologies" in the package
// documentation). Zero fields of opts take their defaults.
// New sends no command; a Redis that is down makes calls fail, not New.
func New(c redis.UniversalClient, opts Options) *Store {
	if opts.Prefix == "" {
		opts.Prefix = DefaultPrefix
	}
	if opts.OpTimeout <= 0 {
		opts.OpTimeout = DefaultOpTimeout
	}
	if opts.BreakerThreshold == 0 {
		opts.BreakerThreshold = DefaultBreakerThreshold
	}
	if opts.BreakerMinBackoff <= 0 {
		opts.BreakerMinBackoff = DefaultBreakerMinBackoff
	}
	if opts.BreakerMaxBackoff <= 0 {
		opts.BreakerMaxBackoff = DefaultBreakerMaxBackoff
	}
	if opts.WaitTimeout <= 0 || opts.WaitTimeout > opts.OpTimeout/2 {
		opts.WaitTimeout = opts.OpTimeout / 2
	}
	s := &Store{c: c, prefix: opts.Prefix, opTimeout: opts.OpTimeout,
		waitReplicas: int64(max(opts.WaitReplicas, 0)), waitTimeout: max(opts.WaitTimeout, time.Millisecond)}
	s.br.threshold = int32(min(max(opts.BreakerThreshold, 0), 1<<30))
	s.br.minBackoff = opts.BreakerMinBackoff
	s.br.maxBackoff = max(opts.BreakerMaxBackoff, opts.BreakerMinBackoff)
	if opts.AutoPipeline {
		if ap, err := c.AsyncAutoPipeline(); err == nil {
			s.ap = ap
		}
	}
	s.ps.init(c)
	s.evictName, _ = s.channelName(evictChannel)
	if opts.CacheTTL > 0 {
		s.cache = newCache(opts.CacheTTL)
	}
	return s
}

// Key kinds, the suffix after the hash tag.
const (
	kindSession = "s"
	kindRecord  = "r"
	kindLog     = "l"
)

// key returns the Redis key of name: prefix, name as the hash tag, kind.
func (s *Store) key(name, kind string) string {
	return s.prefix + "{" + name + "}:" + kind
}

// opCtx bounds one call by the store's OpTimeout.
func (s *Store) opCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, s.opTimeout)
}

// unavailable wraps a failure of Redis (network, timeout, error reply) so
// that it matches both session.ErrUnavailable and err.
func unavailable(op string, err error) error {
	return fmt.Errorf("%w: redisstore: %s: %w", session.ErrUnavailable, op, err)
}

// errIDInUse is returned by Create for an id that is already taken.
var errIDInUse = errors.New("redisstore: session id already in use")

// millis converts a lifetime to whole milliseconds for PX, rounding up and
// never below 1 ms: Redis rejects PX 0, and a key without expiry is never
// written.
func millis(d time.Duration) int64 {
	if d <= 0 {
		return 1
	}
	ms := int64(d / time.Millisecond)
	if d%time.Millisecond != 0 {
		ms++
	}
	return ms
}

func ttlOf(s *session.Session) time.Duration {
	if s.TTL > 0 {
		return s.TTL
	}
	return session.DefaultTTL
}

// getRecord returns the session record at k and restarts its TTL by the
// one the record's header holds, in one round trip: GETEX PX with the TTL
// of the last record this store saw, which is every record's when, as
// usual, the handler gives all sessions one TTL. A record whose TTL is
// another is then read again by getScript, which restarts it from the
// record as stored at that moment, atomically (two round trips, and the
// TTL learnt for the next one). Between the two, and if this process dies
// there, the record lives for the learnt TTL: its content is never
// affected. Against a Redis that refuses GETEX (before 6.2, or an ACL
// without it), every Get takes the script.
func (s *Store) getRecord(ctx context.Context, k string) (string, error) {
	hint := s.ttlHint.Load()
	if hint > 0 {
		cmd := redis.NewStringCmd(ctx, "getex", k, "px", hint)
		err := s.process(ctx, cmd)
		switch {
		case err == nil:
			if v := cmd.Val(); recordTTL(v) == hint {
				return v, nil
			}
		case errors.Is(err, redis.Nil):
			return "", err
		case foreign(err):
			return "", nil // the empty value: not a record
		case refused(err):
			s.ttlHint.Store(-1)
		default:
			return "", err
		}
	}
	cmd, err := s.eval(ctx, getScript, k)
	if err != nil {
		return "", err
	}
	v, err := cmd.Text()
	if err == nil {
		s.learnTTL(recordTTL(v))
	}
	return v, err
}

// learnTTL makes ms the TTL Get restarts records with, unless GETEX was
// refused.
func (s *Store) learnTTL(ms int64) {
	if ms <= 0 {
		return
	}
	for {
		old := s.ttlHint.Load()
		if old < 0 || old == ms || s.ttlHint.CompareAndSwap(old, ms) {
			return
		}
	}
}

// refused reports whether Redis refused a command it does not know or
// the user may not run.
func refused(err error) bool {
	return redis.HasErrorPrefix(err, "unknown command") || redis.HasErrorPrefix(err, "NOPERM")
}

// recordTTL is the TTL (ms) in the header of a session record, as
// getScript reads it, or 0.
func recordTTL(v string) int64 {
	if len(v) == 0 || v[0] != recordV1 && v[0] != recordV2 {
		return 0
	}
	r := reader{s: v[1:]}
	if ms := r.header(); !r.err && ms > 0 {
		return ms
	}
	return 0
}

// getScript returns the record and restarts its TTL from the record's
// header (of version 1 or 2, see codec.go), in one round trip. A key of
// another type reads as the empty string. The TTL is passed on without
// its leading zeros, which Redis refuses in a number, and a header whose
// TTL is zero or has more digits than a record's can (see reader.header)
// restarts nothing, so that no value makes PEXPIRE fail.
var getScript = newScript(`
local v = redis.pcall('GET', KEYS[1])
if type(v) == 'table' then
  if string.find(v.err, '^WRONGTYPE') then return '' end
  return v
end
if v then
  local ttl = string.match(v, '^[\1\2]0*([1-9]%d*):')
  if ttl and #ttl <= 18 then redis.call('PEXPIRE', KEYS[1], ttl) end
end
return v
`)

// updateScript replaces the mutable part of an existing record by ARGV[1]
// and its TTL by ARGV[2] ms, keeping the immutable part, which versions 1
// and 2 encode alike; the record it writes is of version 2, the version of
// ARGV[1]. It returns 1 on success, 0 for a missing key and -1 for a
// record it cannot parse, such as the empty string a key of another type
// reads as. The length of the immutable part is written as the length it
// has, whatever digits the record spelled it with.
var updateScript = newScript(`
local v = redis.pcall('GET', KEYS[1])
if type(v) == 'table' then
  if string.find(v.err, '^WRONGTYPE') then return -1 end
  return v
end
if not v then return 0 end
local n, p = string.match(v, '^[\1\2]%d+:(%d+):()')
if not n then return -1 end
local e = p + tonumber(n) - 1
if e > #v then return -1 end
local imm = string.sub(v, p, e)
redis.call('SET', KEYS[1], '\2' .. ARGV[2] .. ':' .. #imm .. ':' .. imm .. ARGV[1], 'PX', ARGV[2])
return 1
`)

// casScript sets KEYS[1] to ARGV[2] with PX ARGV[3] if its value is
// ARGV[1]. A key of another type has the empty string as its value, which
// SET replaces like any other.
var casScript = newScript(`
local v = redis.pcall('GET', KEYS[1])
if type(v) == 'table' then
  if not string.find(v.err, '^WRONGTYPE') then return v end
  v = ''
end
if v == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
  return 1
end
return 0
`)

// appendScript appends ARGV[1] to the list KEYS[1], makes the list live
// ARGV[2] ms, and returns its length, like the transaction of AppendEvent;
// but a key of another type is an empty log, which it replaces by a list
// of the one element. AppendEvent runs it only when the transaction found
// such a key: the transaction costs Redis less CPU (BenchmarkAppendEvent).
var appendScript = newScript(`
local n = redis.pcall('RPUSH', KEYS[1], ARGV[1])
if type(n) == 'table' then
  if not string.find(n.err, '^WRONGTYPE') then return n end
  redis.call('DEL', KEYS[1])
  n = redis.call('RPUSH', KEYS[1], ARGV[1])
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return n
`)

// Create implements [session.Store] with SET NX PX: it fails if the id is
// taken, and the record lives for the session's TTL.
func (s *Store) Create(ctx context.Context, sess *session.Session) error {
	if err := s.br.allow(); err != nil {
		return unavailable("create", err)
	}
	octx, cancel := s.opCtx(ctx)
	defer cancel()
	rec, ttl := encodeSession(sess), millis(ttlOf(sess))
	s.learnTTL(ttl)
	ok, err := s.setNX(octx, s.key(sess.ID, kindSession), rec, time.Duration(ttl)*time.Millisecond)
	s.observe(ctx, err)
	if err != nil {
		return unavailable("create", err)
	}
	if !ok {
		return errIDInUse
	}
	return nil
}

// setNX is SET NX PX, followed by a WAIT with Options.WaitReplicas; a
// SET that wrote nothing needs no replica.
func (s *Store) setNX(ctx context.Context, k string, v any, px time.Duration) (bool, error) {
	if s.waitReplicas <= 0 {
		cmd := redis.NewBoolCmd(ctx, "set", k, v, "px", px.Milliseconds(), "nx")
		if err := s.process(ctx, cmd); err != nil {
			return false, err
		}
		return cmd.Val(), nil
	}
	var cmd *redis.BoolCmd
	err := s.replicated(ctx, k, func(p redis.Pipeliner) { cmd = p.SetNX(ctx, k, v, px) })
	if isNotReplicated(err) && !cmd.Val() {
		err = nil
	}
	return cmd.Val(), err
}

// runScript runs script on the key k, followed by a WAIT with
// Options.WaitReplicas unless the script returned 0 (it wrote nothing).
// A reply that is not an integer (nil included), which none of the
// store's scripts gives, reads as -1, the scripts' answer for a value they
// cannot parse, and is not an error: Redis answered.
func (s *Store) runScript(ctx context.Context, sc script, k string, args ...any) (int64, error) {
	var cmd *redis.Cmd
	var err error
	if s.waitReplicas <= 0 {
		cmd, err = s.eval(ctx, sc, k, args...)
	} else {
		cmd, err = s.replicatedScript(ctx, sc.Script, k, args...)
	}
	if errors.Is(err, redis.Nil) {
		return -1, nil
	}
	if err != nil && !isNotReplicated(err) {
		return 0, err
	}
	n, cerr := cmd.Int64()
	if cerr != nil {
		n = -1
	}
	if err != nil && n == 0 {
		err = nil
	}
	return n, err
}

// Get implements [session.Store]. It is one round trip that reads the
// record and restarts its TTL by the session's own (see getRecord), and
// returns a fresh copy. A missing, expired or undecodable record is
// session.ErrNotFound. With Options.CacheTTL, a session read recently is
// returned from memory while the cache's eviction subscription is
// confirmed (see [Options.CacheTTL]).
func (s *Store) Get(ctx context.Context, id string) (*session.Session, error) {
	var gen, live uint64
	if c := s.cache; c != nil {
		live = c.live.Load()
		if live != 0 {
			if sess, ok := c.get(id, live, time.Now()); ok {
				return sess, nil
			}
		} else {
			s.startCache(ctx)
			live = c.live.Load()
		}
		gen = c.gen.Load()
	}
	if err := s.br.allow(); err != nil {
		return nil, unavailable("get", err)
	}
	octx, cancel := s.opCtx(ctx)
	defer cancel()
	v, err := s.getRecord(octx, s.key(id, kindSession))
	s.observe(ctx, err)
	if err != nil {
		if errors.Is(err, redis.Nil) {
			return nil, session.ErrNotFound
		}
		return nil, unavailable("get", err)
	}
	sess, err := decodeSession(id, v)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", session.ErrNotFound, err)
	}
	if live != 0 {
		s.cache.put(sess, gen, live, time.Now())
	}
	return sess, nil
}

// Update implements [session.Store]. In one atomic script it replaces
// every field of the stored record but the owner, which stays as stored
// whatever sess holds, and restarts the session's TTL (sess.TTL, which may
// have changed); like SET XX, it writes nothing and returns
// session.ErrNotFound when the session does not exist.
func (s *Store) Update(ctx context.Context, sess *session.Session) error {
	if err := s.br.allow(); err != nil {
		return unavailable("update", err)
	}
	octx, cancel := s.opCtx(ctx)
	defer cancel()
	ttl := millis(ttlOf(sess))
	s.learnTTL(ttl)
	n, err := s.runScript(octx, updateScript, s.key(sess.ID, kindSession), appendMutable(nil, sess), ttl)
	s.observe(ctx, err)
	if err != nil {
		return unavailable("update", err)
	}
	s.evictEverywhere(octx, sess.ID)
	switch n {
	case 1:
		return nil
	case 0:
		return session.ErrNotFound
	default:
		return fmt.Errorf("%w: %w", session.ErrNotFound, errCorrupt)
	}
}

// Delete implements [session.Store] with DEL.
func (s *Store) Delete(ctx context.Context, id string) error {
	if err := s.br.allow(); err != nil {
		return unavailable("delete", err)
	}
	octx, cancel := s.opCtx(ctx)
	defer cancel()
	k := s.key(id, kindSession)
	var err error
	if s.waitReplicas <= 0 {
		err = s.process(octx, redis.NewIntCmd(octx, "del", k))
	} else {
		var del *redis.IntCmd
		err = s.replicated(octx, k, func(p redis.Pipeliner) { del = p.Del(octx, k) })
		if isNotReplicated(err) && del.Val() == 0 {
			err = nil
		}
	}
	s.observe(ctx, err)
	if err != nil {
		return unavailable("delete", err)
	}
	s.evictEverywhere(octx, id)
	return nil
}

// PutIfAbsent implements [session.Store] with SET NX PX. A ttl below one
// millisecond is rounded up to one.
func (s *Store) PutIfAbsent(ctx context.Context, key string, value []byte, ttl time.Duration) (bool, error) {
	if err := s.br.allow(); err != nil {
		return false, unavailable("put", err)
	}
	octx, cancel := s.opCtx(ctx)
	defer cancel()
	ok, err := s.setNX(octx, s.key(key, kindRecord), value, time.Duration(millis(ttl))*time.Millisecond)
	s.observe(ctx, err)
	if err != nil {
		return false, unavailable("put", err)
	}
	return ok, nil
}

// Load implements [session.Store] with GET. A key of another type than
// a string reads as the empty value (not session.ErrNotFound: the key
// exists, and PutIfAbsent does not write over it), which a CompareAndSwap
// from the empty value replaces.
func (s *Store) Load(ctx context.Context, key string) ([]byte, error) {
	if err := s.br.allow(); err != nil {
		return nil, unavailable("load", err)
	}
	octx, cancel := s.opCtx(ctx)
	defer cancel()
	cmd := redis.NewStringCmd(octx, "get", s.key(key, kindRecord))
	err := s.process(octx, cmd)
	v := []byte{} // the value of a key of another type
	if err == nil {
		v, err = cmd.Bytes()
	} else if foreign(err) {
		err = nil
	}
	s.observe(ctx, err)
	if err != nil {
		if errors.Is(err, redis.Nil) {
			return nil, session.ErrNotFound
		}
		return nil, unavailable("load", err)
	}
	return v, nil
}

// CompareAndSwap implements [session.Store] with a Lua script that compares
// and sets (with PX ttl) atomically, so exactly one of racing callers from
// the same old value wins, on any replica.
func (s *Store) CompareAndSwap(ctx context.Context, key string, old, new []byte, ttl time.Duration) (bool, error) {
	if err := s.br.allow(); err != nil {
		return false, unavailable("compare-and-swap", err)
	}
	octx, cancel := s.opCtx(ctx)
	defer cancel()
	n, err := s.runScript(octx, casScript, s.key(key, kindRecord), old, new, millis(ttl))
	s.observe(ctx, err)
	if err != nil {
		return false, unavailable("compare-and-swap", err)
	}
	return n == 1, nil
}

// AppendEvent implements [session.Store] with RPUSH and PEXPIRE in one
// MULTI/EXEC pipeline; the list length RPUSH returns is the event's
// sequence number. A log that expired starts again at 1, and so does a
// key of another type than a list: RPUSH refuses it (WRONGTYPE), and a
// second round trip, appendScript, replaces it.
func (s *Store) AppendEvent(ctx context.Context, stream string, data []byte, ttl time.Duration) (uint64, error) {
	if err := s.br.allow(); err != nil {
		return 0, unavailable("append-event", err)
	}
	octx, cancel := s.opCtx(ctx)
	defer cancel()
	k := s.key(stream, kindLog)
	px := time.Duration(millis(ttl)) * time.Millisecond
	n, err := s.appendTx(octx, k, data, px)
	if foreign(err) {
		n, err = s.runScript(octx, appendScript, k, data, px.Milliseconds())
	}
	s.observe(ctx, err)
	if err != nil {
		return 0, unavailable("append-event", err)
	}
	if n <= 0 {
		// Not the length of a list: Redis answered, but not as RPUSH does.
		return 0, fmt.Errorf("redisstore: append-event: RPUSH returned %d", n)
	}
	return uint64(n), nil
}

// appendTx appends data to the list k and makes it live px, in one
// MULTI/EXEC transaction (followed by WAIT with Options.WaitReplicas),
// and returns RPUSH's answer: the list's length, or its error.
func (s *Store) appendTx(ctx context.Context, k string, data []byte, px time.Duration) (int64, error) {
	if s.waitReplicas <= 0 {
		var push *redis.IntCmd
		_, err := s.c.TxPipelined(ctx, func(p redis.Pipeliner) error {
			push = p.RPush(ctx, k, data)
			p.PExpire(ctx, k, px)
			return nil
		})
		if err != nil {
			return 0, err
		}
		return push.Result()
	}
	// The same transaction spelled out, so that WAIT can follow EXEC on
	// its connection.
	var exec *redis.Cmd
	err := s.replicated(ctx, k, func(p redis.Pipeliner) {
		p.Do(ctx, "multi")
		p.Do(ctx, "rpush", k, data)
		p.Do(ctx, "pexpire", k, px.Milliseconds())
		exec = p.Do(ctx, "exec")
	})
	if err != nil {
		return 0, err
	}
	replies, err := exec.Slice()
	if err != nil || len(replies) == 0 {
		return 0, err
	}
	switch v := replies[0].(type) {
	case int64:
		return v, nil
	case error:
		return 0, v
	}
	return 0, nil
}

// EventsAfter implements [session.Store] with LRANGE after -1: list index
// i holds sequence number i+1. A key of another type than a list is an
// empty log.
func (s *Store) EventsAfter(ctx context.Context, stream string, after uint64) ([]session.Event, error) {
	if after >= 1<<62 {
		return nil, nil
	}
	if err := s.br.allow(); err != nil {
		return nil, unavailable("events-after", err)
	}
	octx, cancel := s.opCtx(ctx)
	defer cancel()
	cmd := redis.NewStringSliceCmd(octx, "lrange", s.key(stream, kindLog), int64(after), -1)
	err := s.process(octx, cmd)
	var vs []string
	if err == nil {
		vs = cmd.Val()
	} else if foreign(err) {
		err = nil
	}
	s.observe(ctx, err)
	if err != nil {
		return nil, unavailable("events-after", err)
	}
	if len(vs) == 0 {
		return nil, nil
	}
	out := make([]session.Event, len(vs))
	for i, v := range vs {
		out[i] = session.Event{Seq: after + 1 + uint64(i), Data: []byte(v)}
	}
	return out, nil
}
