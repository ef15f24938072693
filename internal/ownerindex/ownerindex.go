// Package ownerindex bounds how many live records one owner holds across
// replicas: a signed index per owner, in a shared store, of the ids of the
// owner's records, each with the time it stops counting. Tasks
// (task-owner/<digest>) and pending approvals (approval-owner/<digest>)
// keep theirs here.
//
// Every change of an index is one CompareAndSwap from the exact bytes
// read (PutIfAbsent for a new one), so concurrent admissions for one
// owner, on any replica, never leave more than the bound: of racing
// writers one wins and the others read again. An entry stops counting at
// its Until (the caller gives one no later than the end of what it
// counts), and every write drops the entries that stopped; the index
// itself lives in the store until its last entry stops counting.
//
// What the store returns is treated like client input: an index longer
// than [MaxEntries] entries can be in bytes is not verified at all, and
// one that does not verify (forged, altered, another owner's copied
// here), does not decode or names ids the caller does not accept reads as
// empty and is replaced at the next admission. So an index costs at most
// about [MaxEntries] entries of CPU to read, whatever is stored. Whoever
// can write the store can still delete an index or write back an older
// one, resetting an owner's count: the bound holds against clients, not
// against the store.
package ownerindex

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/mcphandler/mcphandler/internal/sign"
	"github.com/mcphandler/mcphandler/session"
)

// MaxEntries bounds the entries of an index, and so the bound of any
// Index ([Config.Max] is cut to it): reading the longest index costs
// about a millisecond of CPU.
const MaxEntries = 1 << 10

// entryBytes is the most a JSON entry takes besides its id: the keys,
// quotes, a 19-digit time and the separator.
const entryBytes = 32

// maxAttempts bounds the CompareAndSwap attempts of one change.
const maxAttempts = 64

// ErrContended reports a change that lost more races in a row than any
// legitimate load explains.
var ErrContended = errors.New("ownerindex: index contended")

// FullError refuses an admission: the owner holds Max live entries.
type FullError struct {
	// Held is how many entries count now, Max the bound.
	Held, Max int
	// Oldest is when the first of them stops counting.
	Oldest time.Time
}

func (e *FullError) Error() string {
	return fmt.Sprintf("%d held, at most %d; the oldest counts until %s", e.Held, e.Max, e.Oldest.UTC().Format(time.RFC3339))
}

// Config configures an [Index].
type Config struct {
	// Store keeps the indexes. Required.
	Store session.Records
	// Signer signs them, for their key: give each kind of index a
	// purpose of its own. Required.
	Signer *sign.Signer
	// Max bounds the live entries of one owner: at least 1, at most
	// MaxEntries.
	Max int
	// ValidID reports whether an id may be in an index; an index naming
	// any other reads as empty. Required.
	ValidID func(string) bool
	// MaxIDLen is the length of the longest id ValidID accepts. Required.
	MaxIDLen int
	// Recheck is how often, at most, Admit calls its check for one owner
	// (see Admit). Zero: every time.
	Recheck time.Duration
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

// Index keeps the indexes of one kind of record. It is safe for
// concurrent use, and any number of Indexes (one per replica) may share
// one store and signing keys.
type Index struct {
	cfg      Config
	maxBytes int
}

// New returns an Index for cfg.
func New(cfg Config) *Index {
	cfg.Max = min(max(cfg.Max, 1), MaxEntries)
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Index{cfg: cfg, maxBytes: sign.RecordOverhead + 32 + MaxEntries*(cfg.MaxIDLen+entryBytes)}
}

// Entry is one id of an index.
type Entry struct {
	ID    string `json:"i"`
	Until int64  `json:"x"` // unix ms: stops counting
}

// index is what the store keeps under an index's key.
type index struct {
	E []Entry `json:"e"`
	// C is when Admit last called its check (unix ms; 0 never).
	C int64 `json:"c,omitempty"`
}

// load reads the index under key and the exact bytes a change swaps from
// (nil if there is none). An index that is not ours reads as empty, with
// its bytes, so that the next change replaces it.
func (x *Index) load(ctx context.Context, key string) (index, []byte, error) {
	var idx index
	raw, err := x.cfg.Store.Load(ctx, key)
	if errors.Is(err, session.ErrNotFound) {
		return idx, nil, nil
	}
	if err != nil {
		return idx, nil, err
	}
	if len(raw) > x.maxBytes {
		return idx, raw, nil
	}
	p, err := x.cfg.Signer.Open(key, raw)
	if err != nil || json.Unmarshal(p, &idx) != nil || !x.valid(&idx) {
		return index{}, raw, nil
	}
	return idx, raw, nil
}

func (x *Index) valid(idx *index) bool {
	if len(idx.E) > MaxEntries || idx.C < 0 {
		return false
	}
	for _, e := range idx.E {
		if len(e.ID) > x.cfg.MaxIDLen || !x.cfg.ValidID(e.ID) || e.Until <= 0 {
			return false
		}
	}
	return true
}

func (x *Index) now() int64 { return x.cfg.Now().UnixMilli() }

// live returns the entries of idx that still count at now.
func live(idx *index, now int64) []Entry {
	return slices.DeleteFunc(slices.Clone(idx.E), func(e Entry) bool { return e.Until <= now })
}

// Live returns the entries under key that count now, oldest first.
func (x *Index) Live(ctx context.Context, key string) ([]Entry, error) {
	idx, _, err := x.load(ctx, key)
	if err != nil {
		return nil, err
	}
	return live(&idx, x.now()), nil
}

// store writes next under key in place of raw (nil: absent), living until
// its last entry stops counting, and reports whether it won.
func (x *Index) store(ctx context.Context, key string, raw []byte, next index, now int64) (bool, error) {
	b, _ := json.Marshal(next)
	b = x.cfg.Signer.Sign(key, b)
	last := now
	for _, e := range next.E {
		last = max(last, e.Until)
	}
	ttl := max(time.Duration(last-now)*time.Millisecond, time.Millisecond)
	if raw == nil {
		return x.cfg.Store.PutIfAbsent(ctx, key, b, ttl)
	}
	return x.cfg.Store.CompareAndSwap(ctx, key, raw, b, ttl)
}

// Check is what Admit asks, at the bound, which of the live entries still
// count (for records that can stop counting before their Until): it
// returns those that do, in order. It may read the records, and is
// called at most once per Config.Recheck for one owner.
type Check func(ctx context.Context, live []Entry) ([]Entry, error)

// Admit adds id, counting until until, to the index under key, unless
// the owner holds Max live entries: then it is a *FullError. At the bound
// it first asks check (if not nil, and not within Recheck of its last
// call for this index) which entries still count, and keeps only those.
func (x *Index) Admit(ctx context.Context, key, id string, until int64, check Check) error {
	for range maxAttempts {
		idx, raw, err := x.load(ctx, key)
		if err != nil {
			return err
		}
		now := x.now()
		next := index{E: live(&idx, now), C: idx.C}
		if len(next.E) >= x.cfg.Max && check != nil && (idx.C == 0 || now-idx.C >= x.cfg.Recheck.Milliseconds()) {
			if next.E, err = check(ctx, next.E); err != nil {
				return err
			}
			next.C = now
		}
		if len(next.E) >= x.cfg.Max {
			first := slices.MinFunc(next.E, func(a, b Entry) int { return cmp.Compare(a.Until, b.Until) })
			full := &FullError{Held: len(next.E), Max: x.cfg.Max, Oldest: time.UnixMilli(first.Until)}
			if next.C != idx.C {
				// Keep what the check found, and when it looked.
				if _, err := x.store(ctx, key, raw, next, now); err != nil {
					return err
				}
			}
			return full
		}
		next.E = append(next.E, Entry{ID: id, Until: until})
		if ok, err := x.store(ctx, key, raw, next, now); err != nil || ok {
			return err
		}
	}
	return ErrContended
}

// Hold is Admit for a record that may be made again or kept longer under
// one id (a slot, rather than a record of its own): when the index holds
// id already, id counts until the later of its Until and until, and Hold
// never refuses it; otherwise it is Admit without a check. So renewing
// what is counted, or making it again, never counts it twice.
func (x *Index) Hold(ctx context.Context, key, id string, until int64) error {
	for range maxAttempts {
		idx, raw, err := x.load(ctx, key)
		if err != nil {
			return err
		}
		now := x.now()
		next := index{E: live(&idx, now), C: idx.C}
		i := slices.IndexFunc(next.E, func(e Entry) bool { return e.ID == id })
		switch {
		case i >= 0 && next.E[i].Until >= until:
			return nil
		case i >= 0:
			next.E[i].Until = until
		case len(next.E) >= x.cfg.Max:
			first := slices.MinFunc(next.E, func(a, b Entry) int { return cmp.Compare(a.Until, b.Until) })
			return &FullError{Held: len(next.E), Max: x.cfg.Max, Oldest: time.UnixMilli(first.Until)}
		default:
			next.E = append(next.E, Entry{ID: id, Until: until})
		}
		if ok, err := x.store(ctx, key, raw, next, now); err != nil || ok {
			return err
		}
	}
	return ErrContended
}

// Remove takes id out of the index under key: it stops counting at once.
// Removing an id the index does not hold writes nothing.
func (x *Index) Remove(ctx context.Context, key, id string) error {
	for range maxAttempts {
		idx, raw, err := x.load(ctx, key)
		if err != nil || raw == nil {
			return err
		}
		now := x.now()
		next := index{E: live(&idx, now), C: idx.C}
		i := slices.IndexFunc(next.E, func(e Entry) bool { return e.ID == id })
		if i < 0 {
			return nil
		}
		next.E = slices.Delete(next.E, i, i+1)
		if ok, err := x.store(ctx, key, raw, next, now); err != nil || ok {
			return err
		}
	}
	return ErrContended
}
