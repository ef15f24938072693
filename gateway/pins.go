package gateway

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/internal/seal"
	"github.com/mcphandler/mcphandler/session"
)

// Definition is an upstream tool's definition that a pinned upstream
// (Upstream.Pin) serves only once the host approved it for the tenant.
type Definition struct {
	// Tenant is the tenant the approval is for: every caller of it.
	Tenant string
	// Tool is the tool as it would be served, its Origin naming the
	// upstream, the tool's name there and the digest of its definition
	// (ToolOrigin.Digest: SHA-256 of the definition as the upstream sent
	// it, every member, so that a new title, description, schema,
	// annotation or icon is a new definition).
	Tool mcphandler.Tool
	// Approved is the digest approved before for this tool and tenant: ""
	// for a tool seen for the first time, else the tool changed since.
	Approved string
}

// Bounds and keys of the approved definitions.
const (
	pinPrefix = "gw-pins/" // + 32 hexadecimal digits: a tenant's approved digests of one upstream
	pinLabel  = "mcphandler/gateway/pins/v1 "
	pinMethod = "gateway/pins"
	// maxPins bounds the approved digests of one tenant and upstream: as
	// many as one list may hold (upstream.maxTools).
	maxPins = 10000
	// pinRead is how long a replica reuses the approvals it read: an
	// approval made on another replica is served here within it.
	pinRead = 5 * time.Second
	// pinLife is how long approvals are kept after the last one.
	pinLife = 90 * 24 * time.Hour
	// askEvery is how often the host is asked again, per replica, about a
	// definition it did not approve.
	askEvery = time.Minute
)

// pins keeps, per tenant and upstream, the digests of the tool
// definitions the host approved, in Config.Store: one record per tenant
// and upstream ID, under pinPrefix + an HMAC of both, sealed (AES-256-GCM
// under keys derived from StateKeys) and bound to its key, so that
// whoever can write the store but holds no StateKeys cannot approve a
// definition. Deleting the record (which Records cannot do, but the
// store's own client can) makes the tenant's definitions of that upstream
// new ones, put to the host again. It is safe for
// concurrent use.
//
// A record that does not open — forged, altered, another tenant's — is
// none of the tenant's approvals, and not their absence either: the
// upstream's tools are left out (logged) until the host approves again
// (Gateway.ApproveDefinition, which writes over it), so that spoiling
// the record never makes a definition new to Config.Unapproved.
type pins struct {
	recs  session.Records
	keys  *seal.Keys
	names []byte
	now   func() time.Time

	mu     sync.Mutex
	read   map[string]pinsRead  // by store key
	denied map[string]time.Time // by store key, name and digest: when the host said no
}

type pinsRead struct {
	digests map[string]string
	at      time.Time
}

func newPins(cfg *Config, secrets [][]byte, now func() time.Time) (*pins, error) {
	keys, names, err := deriveKeys(secrets, pinLabel)
	if err != nil {
		return nil, err
	}
	return &pins{recs: cfg.Store, keys: keys, names: names, now: now,
		read: map[string]pinsRead{}, denied: map[string]time.Time{}}, nil
}

// key is the store key of tenant's approvals of upstream id.
func (p *pins) key(tenant, id string) string {
	m := hmac.New(sha256.New, p.names)
	writeString(m, tenant)
	writeString(m, id)
	return pinPrefix + hex.EncodeToString(m.Sum(nil)[:16])
}

func pinBinding(tenant, key string) seal.Binding {
	return seal.Binding{Tenant: tenant, Method: pinMethod, Name: key}
}

// errUnreadable reports approvals the store holds that do not open: not
// the gateway's (forged, altered, another tenant's), or sealed with a key
// no longer in StateKeys.
var errUnreadable = errors.New("gateway: the approved definitions in the store do not open")

// load reads the approvals under key, and the bytes read (nil: none); a
// value that does not open is errUnreadable, with its bytes, so that an
// approval can write over it.
func (p *pins) load(ctx context.Context, tenant, key string) (map[string]string, []byte, error) {
	raw, err := p.recs.Load(ctx, key)
	if errors.Is(err, session.ErrNotFound) {
		return map[string]string{}, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	d := map[string]string{}
	b, err := p.keys.Open(string(raw), pinBinding(tenant, key), p.now())
	switch {
	case errors.Is(err, seal.ErrExpired):
		return d, raw, nil // as the store would have dropped it
	case err != nil, json.Unmarshal(b, &d) != nil, len(d) > maxPins:
		return map[string]string{}, raw, errUnreadable
	}
	return d, raw, nil
}

// approved returns the approvals of tenant for upstream id, read at most
// pinRead ago.
func (p *pins) approved(ctx context.Context, tenant, id string) (map[string]string, error) {
	key := p.key(tenant, id)
	p.mu.Lock()
	r, ok := p.read[key]
	p.mu.Unlock()
	if ok && p.now().Sub(r.at) < pinRead {
		return r.digests, nil
	}
	d, _, err := p.load(ctx, tenant, key)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	if len(p.read) >= maxPins {
		clear(p.read) // a bound, not a policy: they are read again
	}
	p.read[key] = pinsRead{digests: d, at: p.now()}
	p.mu.Unlock()
	return d, nil
}

// approve records digest as the approved definition of tool name of
// upstream id for tenant, on every replica sharing the store.
func (p *pins) approve(ctx context.Context, tenant, id, name, digest string) error {
	key := p.key(tenant, id)
	for range 8 {
		d, old, err := p.load(ctx, tenant, key)
		if err != nil && !errors.Is(err, errUnreadable) { // an approval replaces what does not open
			return err
		}
		if _, ok := d[name]; !ok && len(d) >= maxPins {
			return errors.New("gateway: ApproveDefinition: the tenant has approved definitions of 10000 tools of the upstream already")
		}
		d[name] = digest
		b, _ := json.Marshal(d)
		tok, err := p.keys.Seal(pinBinding(tenant, key), b, p.now().Add(pinLife))
		if err != nil {
			return err
		}
		var done bool
		if old == nil {
			done, err = p.recs.PutIfAbsent(ctx, key, []byte(tok), pinLife)
		} else {
			done, err = p.recs.CompareAndSwap(ctx, key, old, []byte(tok), pinLife)
		}
		if err != nil {
			return err
		}
		if done {
			p.mu.Lock()
			p.read[key] = pinsRead{digests: d, at: p.now()}
			p.mu.Unlock()
			return nil
		}
	}
	return errors.New("gateway: ApproveDefinition: the approvals kept changing; try again")
}

// filterPinned keeps the tools of a pinned upstream u whose definition
// the host approved for tenant: one approved before, or one
// Config.Unapproved approves now (recorded). Another is left out,
// answering as an unknown tool, and put to ApproveDefinition again after
// askEvery. Without the approvals (the store failing, or a record that
// does not open), every tool is left out: a pinned upstream is never
// served unchecked.
func (g *Gateway) filterPinned(ctx context.Context, tenant string, u *Upstream, tools []mcphandler.Tool) []mcphandler.Tool {
	if len(tools) == 0 {
		return tools
	}
	p := g.pins
	ok, err := p.approved(ctx, tenant, u.ID)
	if err != nil {
		g.cfg.Logger.Warn("gateway: approved definitions not read, the pinned upstream's tools left out", "upstream", u.ID, "err", err)
		return nil
	}
	key := p.key(tenant, u.ID)
	out := tools[:0]
	for _, t := range tools {
		prev := ok[t.Origin.Name]
		if prev == t.Origin.Digest {
			out = append(out, t)
			continue
		}
		if g.askApproval(ctx, tenant, key, u, t, prev) {
			out = append(out, t)
		}
	}
	return out
}

// askApproval puts t to Config.Unapproved, unless it said no
// within askEvery, and records a yes.
func (g *Gateway) askApproval(ctx context.Context, tenant, key string, u *Upstream, t mcphandler.Tool, prev string) bool {
	p := g.pins
	dk := key + "\x00" + t.Origin.Name + "\x00" + t.Origin.Digest
	p.mu.Lock()
	at, denied := p.denied[dk]
	p.mu.Unlock()
	if denied && p.now().Sub(at) < askEvery {
		return false
	}
	yes := g.cfg.Unapproved != nil && g.cfg.Unapproved(ctx, Definition{Tenant: tenant, Tool: t, Approved: prev})
	if !yes {
		g.cfg.Logger.Warn("gateway: an upstream tool's definition is not approved, left out",
			"upstream", u.ID, "tool", clip(t.Origin.Name), "digest", t.Origin.Digest, "changed", prev != "")
		p.mu.Lock()
		if len(p.denied) >= maxPins {
			clear(p.denied)
		}
		p.denied[dk] = p.now()
		p.mu.Unlock()
		return false
	}
	if err := p.approve(ctx, tenant, u.ID, t.Origin.Name, t.Origin.Digest); err != nil {
		g.cfg.Logger.Warn("gateway: an approved definition not recorded, left out", "upstream", u.ID, "tool", clip(t.Origin.Name), "err", err)
		return false
	}
	return true
}

// ApproveDefinition approves, for every caller of tenant, the definition
// of digest (ToolOrigin.Digest) of the tool name (ToolOrigin.Name) of the
// pinned upstream id (Upstream.ID): the tool is served again, by every
// replica sharing Config.Store within 5 s. Any other definition of it is
// left out until approved in turn. At most 10000 tools per tenant and
// upstream.
func (g *Gateway) ApproveDefinition(ctx context.Context, tenant, id, name, digest string) error {
	if !validID(id) || name == "" || len(digest) != 64 {
		return errors.New("gateway: ApproveDefinition: an upstream id, a tool name and a digest of 64 hexadecimal digits are required")
	}
	if _, err := hex.DecodeString(digest); err != nil {
		return errors.New("gateway: ApproveDefinition: the digest is not hexadecimal")
	}
	p := g.pins
	if err := p.approve(ctx, tenant, id, name, digest); err != nil {
		return err
	}
	p.mu.Lock()
	delete(p.denied, p.key(tenant, id)+"\x00"+name+"\x00"+digest)
	p.mu.Unlock()
	return nil
}
