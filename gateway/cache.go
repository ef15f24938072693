package gateway

import (
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"hash"
	"io"
	"maps"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/gateway/internal/upstream"
)

// list is an upstream's tools as listed for one tenant, URL,
// credentials, era and set of client capabilities, with the era found,
// and how long it is fresh. A list is never changed once made: a list
// invalidated is a copy.
type list struct {
	era     upstream.Era
	version string // the protocol revision spoken
	tools   []upstream.Tool
	fetched time.Time     // when the upstream answered it
	fresh   time.Duration // how long it may be listed (Config.ListTTL, or the upstream's ttlMs when shorter)
	gen     string        // its scope's generation when it was asked for (lists.go)
	scope   [32]byte      // the scope a list_changed of its upstream invalidates (scopeKey)
	invalid bool          // a list_changed came after it: stale, though kept
	hinted  bool          // the upstream gave a ttlMs (2026-07-28): hintTTL
	hintTTL time.Duration
	defs    *listDefs // its tools' definitions, decoded once: shared by its copies
}

// listDefs are a list's tools' definitions, decoded when first served
// (list.decoded), so that a list served many times is decoded once, and
// the tools last served of it (Gateway.tools). It is safe for concurrent
// use.
type listDefs struct {
	once sync.Once
	defs []decodedDef // by index in list.tools

	mu   sync.Mutex
	last *servedTools
}

// servedTools are the tools served of a list for one upstream, as the
// caller's Upstreams gave it, and the headers it was listed with.
type servedTools struct {
	u     Upstream
	hdr   http.Header
	tools []mcphandler.Tool // sorted by name; read only
}

// decoded returns the definitions of l's tools, by index, decoded once
// for l and its copies (l.defs; a list without one decodes them now).
// What they hold is shared: read only.
func (l *list) decoded() []decodedDef {
	d := l.defs
	if d == nil {
		d = new(listDefs)
	}
	d.once.Do(func() {
		d.defs = make([]decodedDef, len(l.tools))
		for i, t := range l.tools {
			d.defs[i] = decodeDef(t)
		}
	})
	return d.defs
}

// served returns the tools last served of l when they were made for an
// Upstream and headers equal to u and hdr (sameUpstream, sameHeader).
func (l *list) served(u *Upstream, hdr http.Header) ([]mcphandler.Tool, bool) {
	if l.defs == nil {
		return nil, false
	}
	l.defs.mu.Lock()
	s := l.defs.last
	l.defs.mu.Unlock()
	if s == nil || !sameUpstream(&s.u, u) || !sameHeader(s.hdr, hdr) {
		return nil, false
	}
	return s.tools, true
}

// keepServed keeps s as the tools last served of l.
func (l *list) keepServed(s *servedTools) {
	if l.defs == nil {
		return
	}
	l.defs.mu.Lock()
	l.defs.last = s
	l.defs.mu.Unlock()
}

// sameUpstream reports whether a and b are the same upstream as a caller
// reaches it: every field equal, its Header and Aliases holding the same
// entries, its Credentials the same source (a source of a type that
// cannot be compared is never the same).
func sameUpstream(a, b *Upstream) bool {
	return a.ID == b.ID && a.URL == b.URL && a.Era == b.Era && sameHeader(a.Header, b.Header) &&
		sameSource(a.Credentials, b.Credentials) && a.CredentialKind == b.CredentialKind && sameOAuth(a.OAuth, b.OAuth) &&
		sameAliases(a.Aliases, b.Aliases) && a.TrustHints == b.TrustHints && a.Confirms == b.Confirms &&
		a.Pin == b.Pin && a.Sessions == b.Sessions && a.SessionTTL == b.SessionTTL
}

// sameSource reports whether a and b are one CredentialSource (both nil,
// equal values of one comparable type, or StaticCredentials of the same
// headers).
func sameSource(a, b CredentialSource) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	if sa, ok := a.(staticCredentials); ok {
		sb, ok := b.(staticCredentials)
		return ok && sameHeader(sa.h, sb.h)
	}
	t := reflect.TypeOf(a)
	return t == reflect.TypeOf(b) && t.Comparable() && a == b
}

// sameOAuth reports whether a and b are the same client (both nil, or
// equal).
func sameOAuth(a, b *OAuthClient) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a == b || a.ClientID == b.ClientID && a.ClientSecret == b.ClientSecret && slices.Equal(a.Scopes, b.Scopes)
}

// sameHeader reports whether a and b hold the same names with the same
// values, in order.
func sameHeader(a, b http.Header) bool {
	if len(a) != len(b) {
		return false
	}
	if len(a) == 0 || reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer() {
		return true
	}
	for k, va := range a {
		vb, ok := b[k]
		if !ok || !slices.Equal(va, vb) {
			return false
		}
	}
	return true
}

// sameAliases reports whether a and b map the same names to the same
// names.
func sameAliases(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	return len(a) == 0 || reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer() || maps.Equal(a, b)
}

// freshAt reports whether l may be served as fresh at now: for a list,
// within its fresh period; for a call's lookup (listing false), within
// ttl (Config.ListTTL), whatever the upstream's ttlMs. Never once
// invalidated.
func (l *list) freshAt(now time.Time, listing bool, ttl time.Duration) bool {
	if l.invalid {
		return false
	}
	if listing {
		ttl = l.fresh
	}
	return now.Before(l.fetched.Add(ttl))
}

// listCache keeps this replica's lists, fresh or not, at most max of them:
// past it, the one put first is forgotten first. It is safe for concurrent
// use.
type listCache struct {
	mu    sync.Mutex
	max   int
	m     map[[32]byte]*list
	order [][32]byte // keys in the order put, oldest first
	// epochs counts the invalidations of each scope, so that a fetch
	// during which its scope was invalidated keeps its list stale (see
	// epoch); at most max scopes, then all forgotten and cleared moved on.
	epochs  map[[32]byte]uint64
	cleared uint64
}

func newListCache(max int) *listCache {
	return &listCache{max: max, m: make(map[[32]byte]*list), epochs: make(map[[32]byte]uint64)}
}

// epoch is where the invalidations of scope stand: a list fetched between
// two readings that differ may predate a change.
func (c *listCache) epoch(scope [32]byte) [2]uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return [2]uint64{c.cleared, c.epochs[scope]}
}

// get returns the list kept under k, fresh or not.
func (c *listCache) get(k [32]byte) (*list, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	l, ok := c.m[k]
	return l, ok
}

func (c *listCache) put(k [32]byte, l *list) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[k]; !ok {
		for len(c.order) >= c.max {
			delete(c.m, c.order[0])
			c.order = c.order[1:]
		}
		c.order = append(c.order, k)
	}
	c.m[k] = l
}

// invalidate marks every list of scope invalid (they stay, as last good
// lists) and returns how many it marked. It takes time linear in the
// lists kept.
func (c *listCache) invalidate(scope [32]byte) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.epochs[scope]; !ok && len(c.epochs) >= c.max {
		clear(c.epochs)
		c.cleared++
	}
	c.epochs[scope]++
	n := 0
	for k, l := range c.m {
		if l.scope == scope && !l.invalid {
			cp := *l
			cp.invalid = true
			c.m[k] = &cp
			n++
		}
	}
	return n
}

// cacheKey says whose list of the upstream at url this is: the caller's
// tenant, the upstream's URL and era, the credentials sent (every header,
// sorted: hdr, what Upstream.Header and Upstream.Credentials gave for the
// caller) and what the client is said to support. Two callers share a
// list only when they are of one tenant and the upstream sees the same
// request from both: callers of one tenant's static credentials do,
// callers with tokens of their own never do, nor two tenants, whatever
// the upstream's cacheScope.
func cacheKey(tenant, url string, hdr http.Header, era Era, caps json.RawMessage) [32]byte {
	var buf [512]byte
	b := appendString(buf[:0], tenant)
	b = appendUpstream(b, url, hdr)
	b = appendString(b, string(era))
	b = appendString(b, string(caps))
	return sha256.Sum256(b)
}

// callerKey names the list of the upstream at url that the caller id was
// last served, with era and caps: kept (for an upstream with
// Upstream.Credentials) next to the lists, so that the caller's tools
// stay listed for a while when the caller's credentials are missing (see
// Gateway.list). It never names a list of cacheKey: its first 8 bytes
// are a length no string has.
func callerKey(url string, id mcphandler.Identity, era Era, caps json.RawMessage) [32]byte {
	var buf [512]byte
	b := append(buf[:0], 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff)
	for _, s := range []string{id.Tenant, id.Subject, url, string(era), string(caps)} {
		b = appendString(b, s)
	}
	return sha256.Sum256(b)
}

// scopeKey says which lists one list_changed of the upstream at url,
// heard with the headers hdr, invalidates: the tenant's lists of that
// URL and credentials, whatever their era and client capabilities. Its
// first 8 bytes are a length no string has, so it never equals a
// cacheKey.
func scopeKey(tenant, url string, hdr http.Header) [32]byte {
	var buf [512]byte
	b := append(buf[:0], 0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff)
	b = appendString(b, tenant)
	return sha256.Sum256(appendUpstream(b, url, hdr))
}

// breakerKey says which upstream, as which caller, a breaker watches: its
// URL and the credentials sent (every header, sorted). The era and the
// client's capabilities change how it is asked, not whether it answers.
func breakerKey(url string, header http.Header) [32]byte {
	var buf [512]byte
	return sha256.Sum256(appendUpstream(buf[:0], url, header))
}

// writeUpstream writes to h what appendUpstream appends.
func writeUpstream(h hash.Hash, url string, header http.Header) {
	var buf [512]byte
	h.Write(appendUpstream(buf[:0], url, header))
}

// appendUpstream appends url and every header as sent: names lowercased
// and sorted, each with the values of its own map entry, whatever its
// spelling (a name the host set in lowercase is sent as it is, so its
// values count as much as a canonical one's).
func appendUpstream(b []byte, url string, header http.Header) []byte {
	b = appendString(b, url)
	var few [8]string // the usual headers, without an allocation
	names := few[:0]
	for k := range header {
		names = append(names, k)
	}
	slices.SortFunc(names, func(a, b string) int {
		return cmp.Or(compareFold(a, b), strings.Compare(a, b))
	})
	for _, k := range names {
		b = binary.LittleEndian.AppendUint64(b, uint64(len(k)))
		for i := 0; i < len(k); i++ {
			c := k[i]
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			b = append(b, c)
		}
		for _, v := range header[k] {
			b = appendString(b, v)
		}
	}
	return b
}

// compareFold compares a and b as strings.Compare compares their ASCII
// lowercase forms, without making them.
func compareFold(a, b string) int {
	for i := 0; i < len(a) && i < len(b); i++ {
		ca, cb := a[i], b[i]
		if 'A' <= ca && ca <= 'Z' {
			ca += 'a' - 'A'
		}
		if 'A' <= cb && cb <= 'Z' {
			cb += 'a' - 'A'
		}
		if ca != cb {
			return cmp.Compare(ca, cb)
		}
	}
	return cmp.Compare(len(a), len(b))
}

// writeString writes s to h after its length, so that no two sequences
// of strings write the same bytes.
func writeString(h hash.Hash, s string) {
	var buf [8]byte
	binary.LittleEndian.PutUint64(buf[:], uint64(len(s)))
	h.Write(buf[:])
	io.WriteString(h, s)
}

// appendString appends s after its length, as writeString writes it.
func appendString(b []byte, s string) []byte {
	b = binary.LittleEndian.AppendUint64(b, uint64(len(s)))
	return append(b, s...)
}
