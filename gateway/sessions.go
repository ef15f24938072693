package gateway

import (
	"bytes"
	"context"
	"crypto/hkdf"
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

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/gateway/internal/upstream"
	"github.com/mcphandler/mcphandler/internal/ownerindex"
	"github.com/mcphandler/mcphandler/internal/seal"
	"github.com/mcphandler/mcphandler/internal/sign"
	"github.com/mcphandler/mcphandler/session"
)

// SessionMode says which calls of an upstream's tools share one upstream
// session. It matters for upstreams spoken to in the 2025 revisions
// (EraSessions, or found so): a 2026-07-28 upstream has no sessions, and
// a 2024-11-05 session lives only as long as the SSE stream of the
// replica that opened it, so their calls always go as PerCall.
type SessionMode int

const (
	// PerCall, the default: each call opens an upstream session of its
	// own (initialize, notifications/initialized, the call, DELETE).
	// Nothing of one call reaches another, and nothing is kept.
	PerCall SessionMode = iota
	// PerSession: the calls of one downstream 2025 session share one
	// upstream session per upstream (ID, URL) and credentials (Header),
	// which any replica sharing Config.Store reuses. A call without a
	// downstream session — a 2026-07-28 client, a Handler with
	// Config.Stateless — goes as PerCall. Two downstream sessions never
	// share one, even of one person.
	PerSession
	// PerPerson: the calls of one person (tenant and subject) share one
	// upstream session per upstream, credentials and client capabilities,
	// across that person's clients and sessions: what one client's call
	// leaves upstream (a page open in a browser, a shell's working
	// directory), another client of the same person sees. Clients that
	// declared other capabilities get sessions of their own, so that the
	// upstream is never told more than the calling client declared. A
	// caller without an identity (empty tenant and subject) goes as
	// PerCall: it cannot be told apart from another.
	PerPerson
)

// String names the mode as in the documentation.
func (m SessionMode) String() string {
	switch m {
	case PerCall:
		return "PerCall"
	case PerSession:
		return "PerSession"
	case PerPerson:
		return "PerPerson"
	}
	return "SessionMode(invalid)"
}

// The defaults of kept upstream sessions (see Config and Upstream).
const (
	defaultSessionTTL          = 30 * time.Minute
	defaultMaxUpstreamSessions = 64
)

// Store keys of kept upstream sessions, and what the gateway derives from
// Config.StateKeys for them.
const (
	keptPrefix      = "gw-session/"  // + slot id: the sealed session
	keptOwnerPrefix = "gw-sessions/" // + owner digest: the identity's slots (ownerindex)
	keptPurpose     = "gateway-upstream-sessions"
	keptLabel       = "mcphandler/gateway/upstream-session/v1 "
	keptMethod      = "gateway/upstream-session" // the seal.Binding's Method
	slotIDLen       = 32                         // hexadecimal digits
	// maxKeptBytes bounds a value read back: larger is not ours, and is
	// not opened. A sealed value of the longest session id is under 1.6 KB.
	maxKeptBytes = 4096
	// renewEvery is the part of its TTL after which a kept session's
	// record is written again by a call that used it.
	renewEvery = 4
)

// tombstone is written over the record of a session the gateway ended,
// for a second: it reads as no session, without being logged as foreign.
var tombstone = []byte("ended")

// keeper keeps the upstream sessions of PerSession and PerPerson in a
// shared store, so that any replica reuses them.
//
// Each is kept under a slot, keptPrefix + 32 hexadecimal digits of
// HMAC-SHA256 (under a key derived from Config.StateKeys) of the mode,
// the caller's tenant and subject, the downstream session id (PerSession)
// or the client's capabilities (PerPerson), the upstream's ID, URL and
// Header: a store key tells nothing of whose it is, and no two callers,
// sessions, upstreams or credentials share one. The value is sealed
// (AES-256-GCM, package seal) with its key, tenant and subject as
// additional data, and holds the upstream's session id, version, logging
// and log level, and when it was written; its end of life (written +
// the upstream's SessionTTL) is sealed with it and is the key's lifetime.
//
// Whoever can write the store but holds no StateKeys can neither read a
// session id (an upstream may take it as a bearer token) nor make the
// gateway use one it chose: a value forged, altered, or copied from
// another key does not open, and reads as no session (logged, at most
// once per 10 s), so the call opens a fresh one and writes it over the
// foreign value. Writing back an earlier value of the same key can only
// give the same caller an earlier session of its own, for what is left
// of its sealed end of life; the upstream then answers it, or answers
// 404 and the gateway opens a new one.
//
// How many slots one identity holds is bounded (Config.MaxUpstreamSessions)
// by an ownerindex under keptOwnerPrefix, each slot counting until its
// record's end of life. It is safe for concurrent use.
type keeper struct {
	store  session.Records
	keys   *seal.Keys
	names  []byte // the HMAC key of slot ids
	owners *ownerindex.Index
	logger *slog.Logger
	now    func() time.Time

	dropped *dropLog

	// opening holds, per slot key, a channel closed when the session this
	// replica is opening there is kept (or not): the calls that find no
	// session meanwhile wait for it rather than open one each.
	omu     sync.Mutex
	opening map[string]chan struct{}
}

// newKeeper derives the keeper's keys from secrets (stateSecrets).
func newKeeper(cfg *Config, secrets [][]byte, now func() time.Time) (*keeper, error) {
	keys, names, err := deriveKeys(secrets, keptLabel)
	if err != nil {
		return nil, err
	}
	signer, err := sign.NewSigner(keptPurpose, secrets...)
	if err != nil {
		return nil, errors.New("gateway: Config.StateKeys: " + err.Error())
	}
	k := &keeper{store: cfg.Store, keys: keys, names: names, logger: cfg.Logger, now: now, opening: map[string]chan struct{}{},
		dropped: &dropLog{logger: cfg.Logger, msg: "gateway: dropped kept upstream sessions from the store that failed verification (forged, altered or moved)"}}
	k.owners = ownerindex.New(ownerindex.Config{Store: cfg.Store, Signer: signer, Max: cfg.MaxUpstreamSessions,
		ValidID: validSlotID, MaxIDLen: slotIDLen, Now: now})
	return k, nil
}

// stateSecrets returns cfg.StateKeys, or a random key when there are none
// and the store is the process's own.
func stateSecrets(cfg *Config) ([][]byte, error) {
	if len(cfg.StateKeys) > 0 {
		return cfg.StateKeys, nil
	}
	if _, local := cfg.Store.(*session.Memory); !local {
		return nil, errors.New("gateway: Config.StateKeys is empty, but Config.Store is shared by replicas: " +
			"every replica must be given the same StateKeys, which seal the upstream sessions and lists kept there")
	}
	k := make([]byte, 32)
	_, _ = rand.Read(k)
	return [][]byte{k}, nil
}

// deriveKeys derives from secrets (newest first) the sealing keys and the
// HMAC key of store names of one use, label: every secret opens, the
// first seals and names.
func deriveKeys(secrets [][]byte, label string) (*seal.Keys, []byte, error) {
	sealing := make([][]byte, len(secrets))
	for i, s := range secrets {
		if len(s) < seal.MinSecretLen {
			return nil, nil, errors.New("gateway: Config.StateKeys: each key must be at least 32 bytes")
		}
		k, err := hkdf.Key(sha256.New, s, nil, label+"seal", 32)
		if err != nil {
			return nil, nil, err
		}
		sealing[i] = k
	}
	keys, err := seal.NewKeys(sealing...)
	if err != nil {
		return nil, nil, errors.New("gateway: Config.StateKeys: " + err.Error())
	}
	names, err := hkdf.Key(sha256.New, secrets[0], nil, label+"names", 32)
	if err != nil {
		return nil, nil, err
	}
	return keys, names, nil
}

// slot is where one caller's session with one upstream is kept.
type slot struct {
	key   string // in the store: keptPrefix + id
	id    string // slotIDLen hexadecimal digits
	owner string // the identity's index: keptOwnerPrefix + digest
	bind  seal.Binding
}

// slotFor is the slot of the upstream (id, url, header) for the caller
// (identity who, downstream session sid for PerSession, client
// capabilities caps for PerPerson).
func (k *keeper) slotFor(mode SessionMode, who mcphandler.Identity, sid, id, url string, header http.Header, caps json.RawMessage) slot {
	m := hmac.New(sha256.New, k.names)
	writeString(m, "slot")
	writeString(m, mode.String())
	writeString(m, who.Tenant)
	writeString(m, who.Subject)
	writeString(m, sid)
	writeString(m, string(caps))
	writeString(m, id)
	writeUpstream(m, url, header)
	slotID := hex.EncodeToString(m.Sum(nil)[:slotIDLen/2])
	o := hmac.New(sha256.New, k.names)
	writeString(o, "owner")
	writeString(o, who.Tenant)
	writeString(o, who.Subject)
	key := keptPrefix + slotID
	return slot{key: key, id: slotID, owner: keptOwnerPrefix + hex.EncodeToString(o.Sum(nil)[:16]),
		bind: seal.Binding{Tenant: who.Tenant, Subject: who.Subject, Method: keptMethod, Name: key}}
}

// slotOf is the slot of f's upstream for this call made at ep (with the
// headers sent now: a credential that changes keeps its own session), and
// false when the call goes as PerCall (see SessionMode).
func (k *keeper) slotOf(f *forward, ep upstream.Endpoint, call *mcphandler.ToolCall, caps json.RawMessage) (slot, bool) {
	if f.ep.Era != upstream.Sessions {
		return slot{}, false
	}
	who := call.Identity
	switch f.sessions {
	case PerSession:
		if call.SessionID == "" {
			return slot{}, false
		}
		return k.slotFor(PerSession, who, call.SessionID, f.upstream, ep.URL, ep.Header, nil), true
	case PerPerson:
		if who.Tenant == "" && who.Subject == "" {
			return slot{}, false
		}
		return k.slotFor(PerPerson, who, "", f.upstream, ep.URL, ep.Header, caps), true
	}
	return slot{}, false
}

// validSlotID reports whether id is slotIDLen lowercase hexadecimal
// digits.
func validSlotID(id string) bool {
	if len(id) != slotIDLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// kept is what the store holds of a session, sealed.
type kept struct {
	ID       string `json:"s"`
	Version  string `json:"v"`
	Logging  bool   `json:"l,omitempty"`
	LogLevel string `json:"ll,omitempty"`
	Written  int64  `json:"w"` // unix ms
}

func (v *kept) session() upstream.Session {
	return upstream.Session{ID: v.ID, Version: v.Version, Logging: v.Logging, LogLevel: v.LogLevel}
}

// seal is the stored value of ks in sl, written at now, living ttl.
func (k *keeper) seal(sl slot, ks upstream.Session, now time.Time, ttl time.Duration) ([]byte, error) {
	p, _ := json.Marshal(kept{ID: ks.ID, Version: ks.Version, Logging: ks.Logging, LogLevel: ks.LogLevel, Written: now.UnixMilli()})
	tok, err := k.keys.Seal(sl.bind, p, now.Add(ttl))
	return []byte(tok), err
}

// load reads the session kept in sl, with the exact bytes a change swaps
// from (nil: none stored). A value that is not a live session of sl —
// expired, ended, foreign — is no session, with its bytes.
func (k *keeper) load(ctx context.Context, sl slot) (*kept, []byte, error) {
	raw, err := k.store.Load(ctx, sl.key)
	switch {
	case errors.Is(err, session.ErrNotFound):
		return nil, nil, nil
	case err != nil:
		return nil, nil, err
	case bytes.Equal(raw, tombstone):
		return nil, raw, nil
	case len(raw) > maxKeptBytes:
		k.dropped.drop(sl.key, errors.New("a value too large"))
		return nil, raw, nil
	}
	p, err := k.keys.Open(string(raw), sl.bind, k.now())
	if errors.Is(err, seal.ErrExpired) {
		return nil, raw, nil
	}
	if err != nil {
		k.dropped.drop(sl.key, err)
		return nil, raw, nil
	}
	var v kept
	if err := json.Unmarshal(p, &v); err != nil || v.Version == "" {
		k.dropped.drop(sl.key, errors.New("a sealed value of another shape"))
		return nil, raw, nil
	}
	return &v, raw, nil
}

// call makes f's call in the upstream session kept for its caller,
// opening one when there is none (see SessionMode); a call that has no
// slot goes as PerCall. A session the upstream ended (404) is opened
// again once, and the call made in the new one only when the upstream
// refused it whole; otherwise the error surfaces. When the session cannot
// be kept (the identity's bound, the store failing), the call goes as
// PerCall, logged.
func (k *keeper) call(ctx context.Context, f *forward, ep upstream.Endpoint, caps json.RawMessage, call *mcphandler.ToolCall, a *asker) (json.RawMessage, error) {
	sl, ok := k.slotOf(f, ep, call, caps)
	if !ok {
		return upstream.CallTool(ctx, ep, caps, f.name, call.Arguments, a)
	}
	v, raw, err := k.load(ctx, sl)
	if err != nil {
		k.logger.Warn("gateway: the store of upstream sessions failed: the call runs in a session of its own",
			"upstream", f.upstream, "err", err)
		return upstream.CallTool(ctx, ep, caps, f.name, call.Arguments, a)
	}
	if v == nil {
		if v, raw, err = k.await(ctx, sl, raw); err != nil {
			return nil, err
		}
	}
	if v == nil {
		return k.callNew(ctx, f, sl, raw, "", ep, caps, call, a)
	}
	ks := v.session()
	res, err := upstream.CallToolIn(ctx, ep, &ks, caps, f.name, call.Arguments, a)
	if gone := (*upstream.SessionGoneError)(nil); errors.As(err, &gone) {
		if !gone.NotRun {
			return nil, err // it may have acted: never run twice
		}
		return k.callNew(ctx, f, sl, raw, ks.ID, ep, caps, call, a)
	}
	k.renew(ctx, f, sl, raw, v, ks)
	return res, err
}

// callNew opens a session in sl (in place of the value old, whose
// session dead the upstream ended, if any), or takes the one another
// call kept meanwhile, and makes the call in it; a session it could not
// keep is ended after the call.
func (k *keeper) callNew(ctx context.Context, f *forward, sl slot, old []byte, dead string, ep upstream.Endpoint,
	caps json.RawMessage, call *mcphandler.ToolCall, a *asker) (json.RawMessage, error) {
	ks, stored, err := k.open(ctx, f, sl, old, dead, ep, caps)
	if err != nil {
		return nil, err
	}
	if !stored {
		defer func() { _ = upstream.EndSession(context.WithoutCancel(ctx), ep, ks) }()
	}
	return upstream.CallToolIn(ctx, ep, &ks, caps, f.name, call.Arguments, a)
}

// open opens a session with f's upstream and keeps it in sl, with one
// CompareAndSwap from old (PutIfAbsent when nil): of concurrent openings
// for one slot, on any replica, one is kept and the others end theirs and
// use it. It reports whether the session returned is kept; one that is
// not is the caller's to end.
func (k *keeper) open(ctx context.Context, f *forward, sl slot, old []byte, dead string, ep upstream.Endpoint,
	caps json.RawMessage) (upstream.Session, bool, error) {
	defer k.end(sl.key, k.begin(sl.key))
	ks, err := upstream.OpenSession(ctx, ep, caps)
	if err != nil {
		return ks, false, err
	}
	now := k.now()
	if err := k.owners.Hold(ctx, sl.owner, sl.id, now.Add(f.ttl).UnixMilli()); err != nil {
		if full := (*ownerindex.FullError)(nil); errors.As(err, &full) {
			k.logger.Warn("gateway: the caller keeps as many upstream sessions as it may: the call runs in a session of its own",
				"upstream", f.upstream, "held", full.Held, "max", full.Max, "until", full.Oldest)
		} else {
			k.logger.Warn("gateway: the store of upstream sessions failed: the call runs in a session of its own",
				"upstream", f.upstream, "err", err)
		}
		return ks, false, nil
	}
	val, err := k.seal(sl, ks, now, f.ttl)
	if err != nil {
		return ks, false, nil
	}
	for range 3 {
		var won bool
		if old == nil {
			won, err = k.store.PutIfAbsent(ctx, sl.key, val, f.ttl)
		} else {
			won, err = k.store.CompareAndSwap(ctx, sl.key, old, val, f.ttl)
		}
		if err != nil {
			k.logger.Warn("gateway: the store of upstream sessions failed: the call runs in a session of its own",
				"upstream", f.upstream, "err", err)
			return ks, false, nil
		}
		if won {
			return ks, true, nil
		}
		cur, raw, err := k.load(ctx, sl)
		if err != nil {
			return ks, false, nil
		}
		if cur != nil && cur.ID != dead {
			// Another call kept one meanwhile: this one is not needed.
			_ = upstream.EndSession(context.WithoutCancel(ctx), ep, ks)
			return cur.session(), true, nil
		}
		old = raw
	}
	return ks, false, nil
}

// begin notes that this replica opens a session in the slot key, unless
// another call does already (nil: then both open, and one is kept).
func (k *keeper) begin(key string) chan struct{} {
	k.omu.Lock()
	defer k.omu.Unlock()
	if _, ok := k.opening[key]; ok {
		return nil
	}
	ch := make(chan struct{})
	k.opening[key] = ch
	return ch
}

// end wakes the calls waiting for the opening begin noted.
func (k *keeper) end(key string, ch chan struct{}) {
	if ch == nil {
		return
	}
	k.omu.Lock()
	delete(k.opening, key)
	k.omu.Unlock()
	close(ch)
}

// await waits, when this replica is opening a session in sl, until it is
// kept, and reads sl again; otherwise it returns what was read (raw).
func (k *keeper) await(ctx context.Context, sl slot, raw []byte) (*kept, []byte, error) {
	k.omu.Lock()
	ch := k.opening[sl.key]
	k.omu.Unlock()
	if ch == nil {
		return nil, raw, nil
	}
	select {
	case <-ch:
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	}
	v, cur, err := k.load(ctx, sl)
	if err != nil {
		return nil, raw, nil
	}
	return v, cur, nil
}

// renew writes the session kept in sl again, after a call that used it,
// once a part of its TTL went by (or its log level changed): the session
// lives SessionTTL after its last use, and its slot counts as long. Its
// failures are ignored: the session then ends by its TTL.
func (k *keeper) renew(ctx context.Context, f *forward, sl slot, raw []byte, v *kept, ks upstream.Session) {
	now := k.now()
	if now.Sub(time.UnixMilli(v.Written)) < f.ttl/renewEvery && ks.LogLevel == v.LogLevel {
		return
	}
	ctx = context.WithoutCancel(ctx)
	if err := k.owners.Hold(ctx, sl.owner, sl.id, now.Add(f.ttl).UnixMilli()); err != nil {
		return
	}
	if val, err := k.seal(sl, ks, now, f.ttl); err == nil {
		_, _ = k.store.CompareAndSwap(ctx, sl.key, raw, val, f.ttl)
	}
}

// endSession ends the upstream sessions kept for the downstream session
// sid of who (PerSession): each is ended upstream (DELETE) and forgotten.
// The upstreams are the caller's now (Config.Upstreams): a session kept
// with credentials it no longer has ends by its TTL.
func (g *Gateway) endSession(ctx context.Context, who mcphandler.Identity, sid string) {
	k := g.keeper
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), g.cfg.Timeout)
	defer cancel()
	ups, err := g.cfg.Upstreams(ctx, who)
	if err != nil {
		g.cfg.Logger.Warn("gateway: the upstreams of an ended session are unknown: their sessions end by their TTL", "err", err)
		return
	}
	ups = g.checkUpstreams(ups)
	var wg sync.WaitGroup
	sem := make(chan struct{}, maxParallel)
	for i := range ups {
		u := &ups[i]
		if u.Sessions != PerSession {
			continue
		}
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			hdr, err := g.credentials(ctx, who, u)
			if err != nil {
				return // a session kept with credentials the owner no longer has ends by its TTL
			}
			sl := k.slotFor(PerSession, who, sid, u.ID, u.URL, hdr, nil)
			v, raw, err := k.load(ctx, sl)
			if err != nil || v == nil {
				return
			}
			ep := g.endpoint(u, hdr)
			ep.Era = upstream.Sessions
			if err := upstream.EndSession(ctx, ep, v.session()); err != nil {
				g.cfg.Logger.Warn("gateway: ending an upstream session failed: it ends by the upstream's own expiry", "upstream", u.ID, "err", err)
			}
			_, _ = k.store.CompareAndSwap(ctx, sl.key, raw, tombstone, time.Second)
			_ = k.owners.Remove(ctx, sl.owner, sl.id)
		})
	}
	wg.Wait()
}

// Interceptor returns an interceptor for the Handler's
// Config.Interceptors that ends, when a 2025 client ends its session
// (DELETE), the upstream sessions kept for it (PerSession): each is
// DELETEd upstream and forgotten before the client's DELETE is answered,
// within Config.Timeout, for the upstreams Config.Upstreams gives the
// session's owner then (a session kept with other credentials ends by its
// TTL). Without it, or when the session expires rather
// than being deleted, they are no longer used and the gateway forgets
// them SessionTTL after their last call; the upstream ends them by its
// own expiry. It does nothing else: every other operation goes through
// unchanged.
func (g *Gateway) Interceptor() mcphandler.Interceptor {
	return func(ctx context.Context, req *mcphandler.Request, next func(context.Context) mcphandler.Result) mcphandler.Result {
		res := next(ctx)
		if req.Kind == mcphandler.KindSessionEnd && res.ErrorCode == 0 && req.SessionID != "" {
			g.endSession(ctx, req.Identity, req.SessionID)
		}
		return res
	}
}
