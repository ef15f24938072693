package gateway

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/mcphandler/mcphandler/gateway/internal/upstream"
	"github.com/mcphandler/mcphandler/internal/seal"
	"github.com/mcphandler/mcphandler/session"
)

// Store keys and channel of the lists kept in Config.Store.
const (
	listPrefix  = "gw-list/" // + 32 hexadecimal digits: a sealed list
	genPrefix   = "gw-lgen/" // + 32 hexadecimal digits: a scope's generation
	listChannel = "gw-lists" // invalidated scopes, for every replica's cache
	listLabel   = "mcphandler/gateway/list/v1 "
	listMethod  = "gateway/list" // the seal.Binding's Method
	genLen      = 32             // hexadecimal digits of a generation
	listMACLen  = 16             // bytes of a channel message's MAC
	maxGenBytes = 64             // a generation read back is at most this long
	genLife     = upstream.MaxHintTTL + 24*time.Hour
)

// listStore keeps the upstream lists: in this replica's cache (l1), and
// sealed in Config.Store, so that any replica reuses a list another one
// fetched, and a list outlives the replica that fetched it.
//
// A list is kept under listPrefix + HMAC-SHA256 (under a key derived from
// Config.StateKeys) of its cacheKey: a store key tells nothing of whose it
// is. The value is sealed (AES-256-GCM, package seal), bound to that key,
// with its end of life (ListTTL + Grace after it was fetched), which is
// the key's lifetime; a value that does not open, or holds more than
// Config.MaxResponseBytes, is no list (logged): whoever can write the
// store but holds no StateKeys cannot make the gateway list a tool.
//
// A list_changed of an upstream invalidates the lists of its scope
// (scopeKey: the tenant, URL and credentials): a new random generation
// is written under genPrefix + the scope's HMAC, and the scope is
// published on listChannel, so that every replica's cache marks its
// lists of that scope invalid. A list read from the store is fresh only
// when it was asked for under the scope's current generation. Delivery
// on a channel is at most once: a replica that missed the message keeps
// serving its own copy, until the copy's fresh period ends (at most
// ListTTL). Whoever can write the store can make a list stale early (a
// new generation) or, writing back an earlier generation, have a list
// that was invalidated served again, but never past the fresh period it
// was fetched with.
type listStore struct {
	recs   session.Records
	ps     session.PubSub // nil: invalidations reach this replica only
	keys   *seal.Keys
	names  []byte // the HMAC key of store keys and channel messages
	l1     *listCache
	keep   time.Duration // a stored list's lifetime: ListTTL + Grace
	max    int64         // the most bytes of a sealed list stored
	logger *slog.Logger
	now    func() time.Time

	dropped *dropLog

	mu   sync.Mutex // guards sub and done
	sub  session.Subscription
	done chan struct{}
}

// listRef is where one list is kept: in this replica's cache under l1,
// in the store under storeKey, its scope's generation under genKey.
type listRef struct {
	l1     [32]byte // cacheKey
	scope  [32]byte // scopeKey
	tenant string
}

func newListStore(cfg *Config, secrets [][]byte, now func() time.Time) (*listStore, error) {
	keys, names, err := deriveKeys(secrets, listLabel)
	if err != nil {
		return nil, err
	}
	s := &listStore{recs: cfg.Store, keys: keys, names: names, l1: newListCache(cfg.MaxCachedLists),
		keep: max(cfg.ListTTL, 0) + max(cfg.Grace, 0), max: cfg.MaxResponseBytes, logger: cfg.Logger, now: now,
		dropped: &dropLog{logger: cfg.Logger, msg: "gateway: lists in the store that are not the gateway's, read as none"}}
	s.ps, _ = cfg.Store.(session.PubSub)
	return s, nil
}

// ref is where the list of the upstream at url, for tenant, with the
// headers hdr, era and client capabilities caps, is kept.
// Only the keys of this replica's cache are made for every list; those
// of the store, when it is asked.
func (s *listStore) ref(tenant, url string, hdr http.Header, era Era, caps json.RawMessage) listRef {
	return listRef{l1: cacheKey(tenant, url, hdr, era, caps), scope: scopeKey(tenant, url, hdr), tenant: tenant}
}

// storeKey is the store key of r's list: listPrefix + id.
func (s *listStore) storeKey(r listRef) string { return listPrefix + s.id("list", r.l1) }

// genKey is the store key of r's scope's generation.
func (s *listStore) genKey(r listRef) string { return genPrefix + s.id("gen", r.scope) }

// bind is what r's sealed list is bound to: its tenant and store key.
func bind(r listRef, key string) seal.Binding {
	return seal.Binding{Tenant: r.tenant, Method: listMethod, Name: key}
}

// id is 32 hexadecimal digits of the HMAC of what and k.
func (s *listStore) id(what string, k [32]byte) string {
	m := hmac.New(sha256.New, s.names)
	writeString(m, what)
	m.Write(k[:])
	return hex.EncodeToString(m.Sum(nil)[:16])
}

// storedList is the sealed payload of a list.
type storedList struct {
	Era     int               `json:"e"`
	Version string            `json:"v"`
	Fetched int64             `json:"f"` // Unix ms
	Fresh   int64             `json:"t"` // ms
	Gen     string            `json:"g"`
	Tools   []json.RawMessage `json:"l"` // each tool's definition, as the upstream sent it
}

// cached returns the newest list kept for r, fresh or not (nil: none),
// and the store's bytes a write of a newer list swaps from (nil: none
// there). It asks the store only when this replica's copy is not fresh
// for the purpose (listing: a list; else a call's lookup, see
// list.freshAt); a store that fails is logged, and the copy served.
func (s *listStore) cached(ctx context.Context, r listRef, now time.Time, listing bool, ttl time.Duration) (*list, []byte) {
	l, _ := s.l1.get(r.l1)
	if l != nil && l.freshAt(now, listing, ttl) {
		return l, nil
	}
	sl, raw, err := s.load(ctx, r)
	if err != nil {
		s.logger.Warn("gateway: upstream list not read from the store", "err", err)
		return l, nil
	}
	if sl != nil && (l == nil || sl.fetched.After(l.fetched) || sl.invalid && !l.invalid && !sl.fetched.Before(l.fetched)) {
		s.l1.put(r.l1, sl)
		l = sl
	}
	return l, raw
}

// load reads the list of r from the store, invalid when its scope's
// generation moved on, and the bytes read.
func (s *listStore) load(ctx context.Context, r listRef) (*list, []byte, error) {
	key := s.storeKey(r)
	raw, err := s.recs.Load(ctx, key)
	if errors.Is(err, session.ErrNotFound) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	if int64(len(raw)) > s.max*4/3+256 {
		s.dropped.drop(key, errors.New("a value too large"))
		return nil, raw, nil
	}
	p, err := s.keys.Open(string(raw), bind(r, key), s.now())
	if errors.Is(err, seal.ErrExpired) {
		return nil, raw, nil
	}
	if err != nil {
		s.dropped.drop(key, err)
		return nil, raw, nil
	}
	var v storedList
	if err := json.Unmarshal(p, &v); err != nil || v.Era < int(upstream.Sessions) || v.Era > int(upstream.Legacy) {
		s.dropped.drop(key, errors.New("a sealed value of another shape"))
		return nil, raw, nil
	}
	gen, err := s.generation(ctx, r)
	if err != nil {
		return nil, nil, err
	}
	l := &list{era: upstream.Era(v.Era), version: v.Version, fetched: time.UnixMilli(v.Fetched),
		fresh: time.Duration(v.Fresh) * time.Millisecond, gen: v.Gen, scope: r.scope, invalid: v.Gen != gen, defs: new(listDefs)}
	l.tools = make([]upstream.Tool, 0, len(v.Tools))
	for _, def := range v.Tools {
		var t struct{ Name string }
		if json.Unmarshal(def, &t) != nil || t.Name == "" {
			s.dropped.drop(key, errors.New("a sealed tool without a name"))
			return nil, raw, nil
		}
		l.tools = append(l.tools, upstream.Tool{Name: t.Name, Def: def})
	}
	return l, raw, nil
}

// generation is the current generation of r's scope ("" when none was
// ever written, or it expired).
func (s *listStore) generation(ctx context.Context, r listRef) (string, error) {
	g, err := s.recs.Load(ctx, s.genKey(r))
	switch {
	case errors.Is(err, session.ErrNotFound):
		return "", nil
	case err != nil:
		return "", err
	case len(g) > maxGenBytes:
		return "foreign", nil // matches no list: every list of the scope is stale
	}
	return string(g), nil
}

// save keeps l, fetched now under its generation, for r: in this
// replica's cache, and in the store unless a newer list got there first
// (old is what was read there: nil, none) or l is too large to store
// (logged). A store that fails is logged: the list stays this replica's.
func (s *listStore) save(ctx context.Context, r listRef, l *list, old []byte) {
	s.l1.put(r.l1, l)
	if s.keep <= 0 {
		return
	}
	v := storedList{Era: int(l.era), Version: l.version, Fetched: l.fetched.UnixMilli(), Fresh: l.fresh.Milliseconds(), Gen: l.gen,
		Tools: make([]json.RawMessage, len(l.tools))}
	for i, t := range l.tools {
		v.Tools[i] = t.Def
	}
	p, err := json.Marshal(v)
	if err != nil {
		return
	}
	if int64(len(p)) > s.max {
		s.logger.Warn("gateway: upstream list too large for the store, kept by this replica only", "bytes", len(p))
		return
	}
	key := s.storeKey(r)
	tok, err := s.keys.Seal(bind(r, key), p, l.fetched.Add(s.keep))
	if err != nil {
		return
	}
	life := l.fetched.Add(s.keep).Sub(s.now())
	if life <= 0 {
		return
	}
	if old == nil {
		_, err = s.recs.PutIfAbsent(ctx, key, []byte(tok), life)
	} else {
		_, err = s.recs.CompareAndSwap(ctx, key, old, []byte(tok), life)
	}
	if err != nil {
		s.logger.Warn("gateway: upstream list not kept in the store", "err", err)
	}
}

// invalidate makes every list of r's scope stale, on every replica: a new
// generation in the store, and a message to every replica's cache.
func (s *listStore) invalidate(ctx context.Context, r listRef) error {
	s.l1.invalidate(r.scope)
	b := make([]byte, genLen/2)
	_, _ = rand.Read(b)
	gen := []byte(hex.EncodeToString(b))
	gk := s.genKey(r)
	old, err := s.recs.Load(ctx, gk)
	switch {
	case errors.Is(err, session.ErrNotFound):
		// Of two replicas writing the first, either one's makes the
		// lists stale.
		_, err = s.recs.PutIfAbsent(ctx, gk, gen, s.genLife())
	case err == nil:
		// A lost swap means another replica moved it on: stale all the same.
		_, err = s.recs.CompareAndSwap(ctx, gk, old, gen, s.genLife())
	}
	if err != nil {
		return err
	}
	if s.ps != nil {
		_, err = s.ps.Publish(ctx, listChannel, s.message(r.scope))
	}
	return err
}

// genLife is how long a generation is kept: longer than any list fetched
// before it, so that its expiry never makes a list it invalidated fresh
// again.
func (s *listStore) genLife() time.Duration { return s.keep + time.Hour }

// message is what listChannel carries for scope: the scope and its MAC.
func (s *listStore) message(scope [32]byte) []byte {
	m := hmac.New(sha256.New, s.names)
	writeString(m, "invalidate")
	m.Write(scope[:])
	return append(scope[:len(scope):len(scope)], m.Sum(nil)[:listMACLen]...)
}

// listen subscribes to listChannel, so that this replica's cache drops
// what another replica invalidated; it returns at once when the store
// has no PubSub. close ends it.
func (s *listStore) listen(ctx context.Context) error {
	if s.ps == nil {
		return nil
	}
	sub, err := s.ps.Subscribe(ctx, listChannel)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.sub, s.done = sub, make(chan struct{})
	s.mu.Unlock()
	go func() {
		defer close(s.done)
		for msg := range sub.C() {
			if len(msg) != 32+listMACLen {
				continue
			}
			scope := [32]byte(msg[:32])
			if !hmac.Equal(msg, s.message(scope)) {
				continue // not a replica's: nothing outside them invalidates a list
			}
			s.l1.invalidate(scope)
		}
	}()
	return nil
}

// close ends listen's subscription and waits for its goroutine.
func (s *listStore) close() {
	s.mu.Lock()
	sub, done := s.sub, s.done
	s.sub = nil
	s.mu.Unlock()
	if sub != nil {
		sub.Close()
		<-done
	}
}

// newGeneration is a list's generation for r, read before it is asked
// for: a list_changed during the list makes it stale at once.
func (s *listStore) newGeneration(ctx context.Context, r listRef) string {
	g, err := s.generation(ctx, r)
	if err != nil {
		return "unknown" // matches no generation: kept as last good, never fresh from the store
	}
	return g
}
