// Package session defines where the handler keeps what outlives one HTTP
// request: the session records of the 2025 revisions and the channels that
// carry a client's answers and the server's notifications to whichever
// request is waiting for them.
//
// A [Store] may be local to the process ([NewMemory]) or shared by several
// replicas (the Redis store), and every implementation must pass the suite
// in package sessiontest.
package session

import (
	"context"
	"errors"
	"time"
)

// ErrNotFound is returned by [Store.Get] and [Store.Update] for a session
// that never existed, expired, or was deleted.
var ErrNotFound = errors.New("session: not found")

// ErrUnavailable wraps failures of a remote store (network, timeout), so the
// handler can answer 503 instead of treating the session as unknown.
var ErrUnavailable = errors.New("session: store unavailable")

// Session is the record of one 2025-era MCP session.
//
// A Session returned by a Store is the caller's own copy: changing it has no
// effect until it is passed to [Store.Update].
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
}

// Capabilities is the set of client capabilities the handler acts on.
type Capabilities uint16

// Client capabilities.
const (
	CapElicitationForm Capabilities = 1 << iota
	CapElicitationURL
	CapSampling
	CapSamplingTools
	CapRoots
	CapRootsListChanged
)

// Has reports whether every capability in c2 is in c.
func (c Capabilities) Has(c2 Capabilities) bool { return c&c2 == c2 }

// Store keeps session records, relays messages between requests, holds
// short-lived records with atomic transitions (confirms, single-use nonces,
// recorded outcomes) and the event logs of resumable SSE streams, possibly
// shared by several replicas. Implementations must be safe for concurrent
// use, and every key they hold must expire.
type Store interface {
	// Create stores a new session. It fails if the ID is already taken.
	Create(ctx context.Context, s *Session) error
	// Get returns a copy of the session and extends its idle lifetime.
	// A missing or expired session is ErrNotFound.
	Get(ctx context.Context, id string) (*Session, error)
	// Update replaces every field of an existing session but ID and Owner
	// (the legacy HTTP+SSE transport negotiates the version after the
	// session exists). A missing session is ErrNotFound.
	Update(ctx context.Context, s *Session) error
	// Delete removes the session; deleting a missing session is not an error.
	Delete(ctx context.Context, id string) error
	// Admit records that the session s, just created, belongs to s.Owner,
	// and ends the owner's oldest sessions beyond the newest max: each is
	// deleted as by Delete, and their ids are returned, oldest first.
	// Sessions that expired or were deleted do not count. Concurrent calls
	// for one owner, on any replica, end each session at most once and
	// leave at most max of the owner's admitted sessions. What the store
	// keeps for an owner lives no longer than its newest session (s.TTL).
	// A max below 1 ends nothing.
	Admit(ctx context.Context, s *Session, max int) (ended []string, err error)

	// Publish delivers msg to every current subscriber of channel and
	// reports how many there were. Messages published with no subscriber
	// are dropped.
	Publish(ctx context.Context, channel string, msg []byte) (int, error)
	// Subscribe starts receiving the messages published on channel from
	// the moment it returns. The subscription must be closed.
	Subscribe(ctx context.Context, channel string) (Subscription, error)

	// PutIfAbsent stores value under key for ttl unless key exists, and
	// reports whether it did.
	PutIfAbsent(ctx context.Context, key string, value []byte, ttl time.Duration) (bool, error)
	// Load returns the value under key; a missing or expired key is
	// ErrNotFound.
	Load(ctx context.Context, key string) ([]byte, error)
	// CompareAndSwap replaces the value under key with new, and sets its
	// lifetime to ttl, if and only if the current value equals old. It
	// reports whether it swapped; a missing key never swaps.
	CompareAndSwap(ctx context.Context, key string, old, new []byte, ttl time.Duration) (bool, error)

	// AppendEvent appends data to the event log of stream, keeping the log
	// for ttl after its last append, and returns the event's sequence
	// number: 1 for the first event, then consecutive.
	AppendEvent(ctx context.Context, stream string, data []byte, ttl time.Duration) (uint64, error)
	// EventsAfter returns the events of stream with a sequence number
	// greater than after, in order. An unknown or expired stream has none.
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
