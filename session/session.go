// Package session defines where the handler keeps what outlives one HTTP
// request: the session records of the 2025 revisions and the channels that
// carry a client's answers and the server's notifications to whichever
// request is waiting for them.
//
// A [Store] may be local to the process ([NewMemory]) or shared by several
// replicas (the Redis store), and every implementation must pass the suite
// in package sessiontest. It is the sum of four parts, which a host may
// implement or wrap one at a time: [Sessions] (the session records),
// [PubSub] (messages between requests), [Records] (short-lived values with
// atomic transitions) and [EventLog] (the event logs of resumable
// streams).
package session

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// ErrNotFound is returned by [Sessions.Get] and [Sessions.Update] for a
// session that never existed, expired, or was deleted, and by
// [Records.Load] for a missing or expired key.
var ErrNotFound = errors.New("session: not found")

// ErrUnavailable wraps failures of a remote store (network, timeout), so the
// handler can answer 503 instead of treating the session as unknown.
var ErrUnavailable = errors.New("session: store unavailable")

// Session is the record of one 2025-era MCP session.
//
// A Session returned by a Store is the caller's own copy: changing it has no
// effect until it is passed to [Sessions.Update].
type Session struct {
	// ID is the Mcp-Session-Id: at least 128 random bits, visible ASCII.
	ID string
	// Owner binds the session to the identity that created it; a request
	// whose identity maps to another owner must be treated as unknown.
	Owner string
	// ProtocolVersion is the revision negotiated at initialize.
	ProtocolVersion string
	// ClientName and ClientVersion are the client's self-reported info.
	ClientName, ClientVersion string
	// Capabilities are the client capabilities declared at initialize.
	Capabilities Capabilities
	// Initialized is set once notifications/initialized arrived.
	Initialized bool
	// LogLevel is the minimum level set by logging/setLevel ("" = none sent).
	LogLevel string
	// Subscriptions are the resource URIs the client subscribed to.
	Subscriptions []string
	// TTL is how long the session lives without being used; every Get
	// extends it by this much. Zero means the store's default.
	TTL time.Duration
	// Created is when the session was created: the handler sets it before
	// Create and passes back the value it read to Update. Stores keep it
	// as Create and Update were given it, to the millisecond at least
	// (zero stays zero). A record written without it (by an earlier
	// release) reads as zero.
	Created time.Time
}

// Capabilities is the set of client capabilities the handler acts on, one
// bit per capability. Its String method names the capabilities, for logs
// and test failures.
type Capabilities uint16

// Client capabilities.
//
// The values are fixed: never renumber a constant or reuse the value of a
// retired one, and add a new capability with the next free bit. A store
// must not depend on them either: the Redis store keeps capabilities by
// name, so that a record means the same to every release that reads it.
const (
	CapElicitationForm  Capabilities = 1 << 0 // elicitation, form mode
	CapElicitationURL   Capabilities = 1 << 1 // elicitation, URL mode
	CapSampling         Capabilities = 1 << 2 // sampling
	CapSamplingTools    Capabilities = 1 << 3 // sampling with tools
	CapRoots            Capabilities = 1 << 4 // roots
	CapRootsListChanged Capabilities = 1 << 5 // roots with listChanged
	CapUIApps           Capabilities = 1 << 6 // MCP Apps (io.modelcontextprotocol/ui) with text/html;profile=mcp-app
)

// capNames are the names String gives, in bit order.
var capNames = [...]string{
	"elicitation.form",
	"elicitation.url",
	"sampling",
	"sampling.tools",
	"roots",
	"roots.listChanged",
	"ui.mcp-app",
}

// Has reports whether every capability in c2 is in c.
func (c Capabilities) Has(c2 Capabilities) bool { return c&c2 == c2 }

// String returns the names of the capabilities in c joined with "|", such
// as "elicitation.form|sampling", followed by the bits that name no
// capability in hexadecimal; "0" for none.
func (c Capabilities) String() string {
	if c == 0 {
		return "0"
	}
	var b strings.Builder
	for i, name := range capNames {
		if c&(1<<i) == 0 {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('|')
		}
		b.WriteString(name)
	}
	if rest := c &^ (1<<len(capNames) - 1); rest != 0 {
		if b.Len() > 0 {
			b.WriteByte('|')
		}
		fmt.Fprintf(&b, "%#x", uint16(rest))
	}
	return b.String()
}

// Store is everything the handler keeps outside one request: [Sessions],
// [PubSub], [Records] and [EventLog]. A host may implement it whole, or
// compose it from parts, each implemented or wrapped on its own:
//
//	store := struct {
//		session.Sessions
//		session.PubSub
//		session.Records
//		session.EventLog
//	}{sessions, bus, shared, shared}
//
// Implementations must be safe for concurrent use, every key they hold
// must expire, and every implementation must pass sessiontest.Run (or,
// part by part, sessiontest.RunSessions, RunPubSub, RunRecords and
// RunEventLog). Errors other than [ErrNotFound] should wrap
// [ErrUnavailable] when the store could not be reached: the handler
// answers those with 503, and any other error as an internal one.
//
// What a shared store holds is input like a client's: something else with
// access to it may have written anything anywhere. A value the store
// cannot read back as what it keeps there (undecodable bytes, a Redis key
// of another type) is never ErrUnavailable, since the store was reached:
// each method below says what it reads as.
type Store interface {
	Sessions
	PubSub
	Records
	EventLog
}

// Sessions keeps the records of 2025-era sessions, and bounds how many one
// owner holds. Every method may be called concurrently, for the same
// session too, from any replica sharing the store; a Session passed in is
// not retained, and one returned is the caller's own copy.
//
// What must expire: a session lives for its TTL ([DefaultTTL] when zero)
// after its last Create, Get or Update, and what Admit keeps for an owner
// lives no longer than the owner's newest session.
type Sessions interface {
	// Create stores a new session. It fails (with an error that is not
	// ErrNotFound) if the ID is already taken by a live session, and
	// leaves that session unchanged.
	Create(ctx context.Context, s *Session) error
	// Get returns a copy of the session and extends its idle lifetime by
	// its TTL. A missing, expired or deleted session, or a record the
	// store cannot read back as one (of any type), is ErrNotFound.
	Get(ctx context.Context, id string) (*Session, error)
	// Update replaces every field of an existing session but ID and Owner
	// (the legacy HTTP+SSE transport negotiates the version after the
	// session exists), which stay as stored whatever s holds, and restarts
	// its lifetime with s.TTL. A missing session, or a record the store
	// cannot read back as one, is ErrNotFound, and nothing is written. The
	// last of concurrent Updates wins.
	Update(ctx context.Context, s *Session) error
	// Delete removes the session; deleting a missing session is not an
	// error.
	Delete(ctx context.Context, id string) error
	// Admit records that the session s, just created, belongs to s.Owner,
	// and ends the owner's oldest sessions beyond the newest max: each is
	// deleted as by Delete, and their ids are returned, oldest first.
	// Sessions that expired or were deleted do not count. Concurrent calls
	// for one owner, on any replica, end each session at most once and
	// leave at most max of the owner's admitted sessions. What the store
	// keeps for an owner lives no longer than its newest session (s.TTL).
	// A max below 1 ends nothing. What the store keeps for the owner, if
	// it cannot read it back (or it is larger than the store ever makes
	// it), counts no session and is replaced: it never makes Admit fail,
	// nor end more sessions than a well-formed one would.
	Admit(ctx context.Context, s *Session, max int) (ended []string, err error)
}

// PubSub carries messages between requests, on any replica: answers to a
// waiting request, stream events, cancellations, change notifications.
// Delivery is at most once and nothing is stored, so nothing expires; a
// channel exists while it has subscribers. Publish and Subscribe may be
// called concurrently, and a Subscription is safe for concurrent use.
type PubSub interface {
	// Publish delivers msg to every current subscriber of channel and
	// reports how many there were. Messages published with no subscriber
	// are dropped. Publish never waits for a slow subscriber: one whose
	// buffer is full misses the message (whether it is still counted
	// depends on the store). Publish does not retain msg.
	Publish(ctx context.Context, channel string, msg []byte) (int, error)
	// Subscribe starts receiving the messages published on channel from
	// the moment it returns, in publication order. ctx bounds the call,
	// not the subscription, which lasts until it is closed and must be.
	Subscribe(ctx context.Context, channel string) (Subscription, error)
}

// Records holds short-lived values with atomic transitions, shared by every
// replica: confirms, single-use nonces, recorded outcomes. Every method may
// be called concurrently, for the same key too; values passed in are not
// retained, and values returned are the caller's own.
//
// What must expire: a key lives for the ttl of the call that last wrote it
// (a ttl below the store's resolution is rounded up, never to "forever").
type Records interface {
	// PutIfAbsent stores value under key for ttl unless key exists, and
	// reports whether it did. Of concurrent calls for a missing key,
	// exactly one stores.
	PutIfAbsent(ctx context.Context, key string, value []byte, ttl time.Duration) (bool, error)
	// Load returns the value under key; a missing or expired key is
	// ErrNotFound. A key whose value the store cannot read back as bytes
	// (a Redis key of another type) holds the empty value: Load returns
	// it, PutIfAbsent does not write over it, and a CompareAndSwap from it
	// replaces it, as with any value.
	Load(ctx context.Context, key string) ([]byte, error)
	// CompareAndSwap replaces the value under key with new, and sets its
	// lifetime to ttl, if and only if the current value equals old. It
	// reports whether it swapped; a missing key never swaps. Of
	// concurrent calls from the same old value, at most one swaps.
	CompareAndSwap(ctx context.Context, key string, old, new []byte, ttl time.Duration) (bool, error)
}

// EventLog keeps the event logs of resumable SSE streams, so that a stream
// can be resumed on any replica. Every method may be called concurrently;
// concurrent appends to one stream get distinct, consecutive sequence
// numbers. Data passed in is not retained, and data returned is the
// caller's own.
//
// What must expire: a log lives for the ttl of its last AppendEvent; a
// stream whose log expired starts again at sequence number 1.
type EventLog interface {
	// AppendEvent appends data to the event log of stream, keeping the log
	// for ttl after its last append, and returns the event's sequence
	// number: 1 for the first event, then consecutive. A log the store
	// cannot read back as one is empty: it is replaced, and the event is
	// number 1.
	AppendEvent(ctx context.Context, stream string, data []byte, ttl time.Duration) (uint64, error)
	// EventsAfter returns the events of stream with a sequence number
	// greater than after, in order. An unknown or expired stream, or a
	// log the store cannot read back as one, has none, and that is not an
	// error.
	EventsAfter(ctx context.Context, stream string, after uint64) ([]Event, error)
}

// Event is one entry of a stream's event log.
type Event struct {
	Seq  uint64
	Data []byte
}

// Subscription receives the messages of one channel.
type Subscription interface {
	// C delivers messages in publication order. It is closed by Close.
	C() <-chan []byte
	// Close stops delivery. It is safe to call more than once.
	Close() error
}

// DefaultTTL is the idle lifetime of a session whose TTL is zero.
const DefaultTTL = 30 * time.Minute
