// Package record keeps one kind of signed record in a shared store as a
// state machine: every change is one compare-and-swap from the exact bytes
// read, so of processes racing for a transition exactly one wins and the
// others read what it decided. Confirms, decided nonces, approvals and
// tasks are kept this way; a [Lease] says which process is responsible for
// a record while it works on it.
//
// A record is signed for its key (package sign), so that something that
// can write the store but does not hold the secrets can neither forge one
// nor move one to another key. What it can still do is write back a
// genuine record it copied earlier. A record that carries a revision
// ([Life].Rev, incremented by every write) and an end of life is protected
// against that by the process's [revs.Memory]: a process refuses a record
// older than one it saw, and every process refuses a record past its
// signed end of life. A kind without that memory (Kind.Revs nil) keeps
// only the end-of-life check; it must bound copies otherwise (package
// approval remembers the transitions it heard of).
//
// The stored bytes are the signature followed by the record's JSON, as
// encoding/json writes it: a kind fixes its format by its Go type, and
// changing that type changes what replicas of two releases exchange.
package record

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/mcphandler/mcphandler/internal/revs"
	"github.com/mcphandler/mcphandler/internal/sign"
	"github.com/mcphandler/mcphandler/session"
)

// Life is a record's revision and end of life, as its kind stores them.
type Life struct {
	// Rev is incremented by every write; 0 means the kind keeps no
	// revisions.
	Rev uint64
	// End is the record's end of life, unix ms, signed with it: no process
	// acts on it from then on, whatever its lifetime in the store says. 0
	// means the record says none (the kind may imply one, see Kind.Load).
	End int64
}

// Body is what a kind's record type provides: it checks itself like client
// input (it comes from the store) and carries its Life. Both methods are
// on the pointer type.
type Body interface {
	Valid() bool
	Life() Life
	SetLife(Life)
}

// Errors of Load. A record that is ErrInvalid must be treated as absent:
// nothing acts on it.
var (
	// ErrInvalid is a record that does not verify, decode or check.
	ErrInvalid = errors.New("record: invalid record in the store")
	// ErrRolledBack is a genuine record older than one this process saw:
	// written back by something that can write the store.
	ErrRolledBack = errors.New("record: a record older than one this process saw (written back)")
	// ErrEnded is a genuine record past its signed end of life.
	ErrEnded = errors.New("record: a record past its signed end of life")
)

// Kind is one kind of record, T its Go type. Set the fields before first
// use and do not change them after; a Kind is then safe for concurrent use.
type Kind[T any, P interface {
	*T
	Body
}] struct {
	// Store holds the records.
	Store session.Records
	// Signer signs and verifies them, for their key.
	Signer *sign.Signer
	// Revs remembers the revisions this process saw; nil keeps no
	// memory (the kind bounds copies otherwise).
	Revs *revs.Memory
	// Implied, if set, is the end of life (unix ms) of a record that says
	// none, from what it says (a record of an earlier release, say); 0
	// means none.
	Implied func(P) int64
	// Span is how long Revs remembers a record that has no end of life,
	// said or implied.
	Span time.Duration
	// Dropped, if set, is told of every genuine-looking record Load
	// refused, with why: one that does not verify (a sign error), was
	// rolled back (ErrRolledBack) or is past its end (ErrEnded). A
	// verified record that does not decode or check is refused silently.
	Dropped func(key string, err error)
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

func (k *Kind[T, P]) now() time.Time {
	if k.Now != nil {
		return k.Now()
	}
	return time.Now()
}

func (k *Kind[T, P]) drop(key string, err error) {
	if k.Dropped != nil {
		k.Dropped(key, err)
	}
}

// Load reads the record under key, and the exact bytes a Swap must start
// from. A missing record is the store's error (session.ErrNotFound). A
// record that does not verify, decode or check, that is older than a
// revision this process saw, or that is past its end of life is refused
// (see Dropped): Load returns an error wrapping ErrInvalid.
func (k *Kind[T, P]) Load(ctx context.Context, key string) (T, []byte, error) {
	var v T
	var since uint64
	if k.Revs != nil {
		since = k.Revs.Begin()
	}
	raw, err := k.Store.Load(ctx, key)
	if err != nil {
		return v, nil, err
	}
	p, err := k.Signer.Open(key, raw)
	if err != nil {
		k.drop(key, err)
		return v, nil, ErrInvalid
	}
	if json.Unmarshal(p, &v) != nil || !P(&v).Valid() {
		var zero T
		return zero, nil, ErrInvalid
	}
	if err := k.live(key, P(&v), since); err != nil {
		k.drop(key, err)
		var zero T
		return zero, nil, errors.Join(ErrInvalid, err)
	}
	return v, raw, nil
}

// live checks a verified record's life against its end and this process's
// memory of its revisions, and remembers its revision.
func (k *Kind[T, P]) live(key string, v P, since uint64) error {
	l := v.Life()
	end, now := l.End, k.now().UnixMilli()
	if end == 0 && k.Implied != nil {
		end = k.Implied(v)
	}
	switch {
	case end != 0 && now >= end:
		return ErrEnded
	case k.Revs == nil:
		return nil
	case end == 0:
		end = now + k.Span.Milliseconds()
	}
	if !k.Revs.See(key, l.Rev, end, now, since) {
		return ErrRolledBack
	}
	return nil
}

// encode signs v for key. Every JSON value in a record was checked on its
// way in; should one not encode, encode panics rather than store a record
// that would read as absent.
func (k *Kind[T, P]) encode(key string, v P) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic("record: encoding a record of " + key + ": " + err.Error())
	}
	return k.Signer.Sign(key, b)
}

// Encode returns the bytes v is stored as under key, as Create and Swap
// store them (v's Life as it is).
func (k *Kind[T, P]) Encode(key string, v P) []byte { return k.encode(key, v) }

// Create stores v under key for ttl unless key exists, and returns the
// bytes stored. created is false, with no error, when key exists. A kind
// with revisions gives v revision 1 when it has none.
func (k *Kind[T, P]) Create(ctx context.Context, key string, v P, ttl time.Duration) (raw []byte, created bool, err error) {
	l := v.Life()
	if k.Revs != nil && l.Rev == 0 {
		l.Rev = 1
		v.SetLife(l)
	}
	raw = k.encode(key, v)
	if created, err = k.Store.PutIfAbsent(ctx, key, raw, ttl); err != nil || !created {
		return nil, false, err
	}
	k.wrote(key, l)
	return raw, true, nil
}

// Swap replaces the record read as raw under key with next, to live ttl in
// the store, and returns the bytes stored. next gets the revision after
// raw's; its End is kept as next says. swapped is false, with no error,
// when another write came first, or when this process knows a revision
// later than raw's (the read was stale, or the record rolled back): read
// the record again. The swap is not cancelled with ctx once begun: a
// transition is made or not, never left half known by the caller leaving.
func (k *Kind[T, P]) Swap(ctx context.Context, key string, raw []byte, next P, ttl time.Duration) (b []byte, swapped bool, err error) {
	l := next.Life()
	if k.Revs != nil {
		rev := Rev(raw)
		if k.Revs.Newer(key, rev, k.now().UnixMilli()) {
			return nil, false, nil
		}
		l.Rev = rev + 1
		next.SetLife(l)
	}
	b = k.encode(key, next)
	swapped, err = k.Store.CompareAndSwap(context.WithoutCancel(ctx), key, raw, b, ttl)
	if err != nil || !swapped {
		return nil, false, err
	}
	k.wrote(key, l)
	return b, true, nil
}

// wrote remembers the life of a record this process wrote.
func (k *Kind[T, P]) wrote(key string, l Life) {
	if k.Revs == nil {
		return
	}
	now := k.now().UnixMilli()
	end := l.End
	if end == 0 {
		end = now + k.Span.Milliseconds()
	}
	k.Revs.See(key, l.Rev, end, now, k.Revs.Begin())
}

// Rev is the revision of a record as stored (its bytes as Load returned
// them, verified): 0 when it has none or they do not decode.
func Rev(raw []byte) uint64 {
	var l struct {
		Rev uint64 `json:"rev"`
	}
	if len(raw) > sign.RecordOverhead {
		json.Unmarshal(raw[sign.RecordOverhead:], &l)
	}
	return l.Rev
}
