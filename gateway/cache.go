package gateway

import (
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"hash"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/gateway/internal/upstream"
)

// list is an upstream's tools as listed for one URL, credentials, era
// and set of client capabilities, with the era found.
type list struct {
	era     upstream.Era
	version string // the protocol revision spoken
	tools   []upstream.Tool
}

// listCache keeps lists until they expire, at most max of them: past it,
// the one put first is forgotten first. It is safe for concurrent use.
type listCache struct {
	mu    sync.Mutex
	max   int
	m     map[[32]byte]cached
	order [][32]byte // keys in the order put, oldest first
}

type cached struct {
	l   *list
	exp time.Time
}

func newListCache(max int) *listCache {
	return &listCache{max: max, m: make(map[[32]byte]cached)}
}

func (c *listCache) get(k [32]byte, now time.Time) (*list, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[k]
	if !ok || !now.Before(e.exp) {
		return nil, false
	}
	return e.l, true
}

// getRecent returns the list kept under k if it expired no more than
// grace ago: a caller's last good list of an upstream, when the caller's
// credentials there are missing now.
func (c *listCache) getRecent(k [32]byte, now time.Time, grace time.Duration) (*list, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[k]
	if !ok || !now.Before(e.exp.Add(grace)) {
		return nil, false
	}
	return e.l, true
}

// getStale returns the list kept under k, expired or not: the last good
// list of an upstream that fails now (see Config.Grace).
func (c *listCache) getStale(k [32]byte) (*list, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[k]
	return e.l, ok
}

func (c *listCache) put(k [32]byte, l *list, exp time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[k]; !ok {
		for len(c.order) >= c.max {
			delete(c.m, c.order[0])
			c.order = c.order[1:]
		}
		c.order = append(c.order, k)
	}
	c.m[k] = cached{l: l, exp: exp}
}

// cacheKey says whose list of the upstream at url this is: its URL and
// era, the credentials sent (every header, sorted: hdr, what
// Upstream.Header and Upstream.Credentials gave for the caller) and what
// the client is said to support. Two callers share a list only when the
// upstream sees the same request from both: callers of one tenant's
// static credentials do, callers with tokens of their own never do.
func cacheKey(url string, hdr http.Header, era Era, caps json.RawMessage) [32]byte {
	h := sha256.New()
	writeUpstream(h, url, hdr)
	writeString(h, string(era))
	writeString(h, string(caps))
	var k [32]byte
	h.Sum(k[:0])
	return k
}

// callerKey names the list of the upstream at url that the caller id was
// last served, with era and caps: kept (for an upstream with
// Upstream.Credentials) next to the lists, so that the caller's tools
// stay listed for a while when the caller's credentials are missing (see
// Gateway.list). It never names a list of cacheKey: its first 8 bytes
// are a length no string has.
func callerKey(url string, id mcphandler.Identity, era Era, caps json.RawMessage) [32]byte {
	h := sha256.New()
	h.Write([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	for _, s := range []string{id.Tenant, id.Subject, url, string(era), string(caps)} {
		writeString(h, s)
	}
	var k [32]byte
	h.Sum(k[:0])
	return k
}

// breakerKey says which upstream, as which caller, a breaker watches: its
// URL and the credentials sent (every header, sorted). The era and the
// client's capabilities change how it is asked, not whether it answers.
func breakerKey(url string, header http.Header) [32]byte {
	h := sha256.New()
	writeUpstream(h, url, header)
	var k [32]byte
	h.Sum(k[:0])
	return k
}

// writeUpstream writes url and every header as sent: names lowercased
// and sorted, each with the values of its own map entry, whatever its
// spelling (a name the host set in lowercase is sent as it is, so its
// values count as much as a canonical one's).
func writeUpstream(h hash.Hash, url string, header http.Header) {
	writeString(h, url)
	names := slices.Collect(maps.Keys(header))
	slices.SortFunc(names, func(a, b string) int {
		return cmp.Or(strings.Compare(strings.ToLower(a), strings.ToLower(b)), strings.Compare(a, b))
	})
	for _, k := range names {
		writeString(h, strings.ToLower(k))
		for _, v := range header[k] {
			writeString(h, v)
		}
	}
}

// writeString writes s to h after its length, so that no two sequences
// of strings write the same bytes.
func writeString(h hash.Hash, s string) {
	h.Write(binary.LittleEndian.AppendUint64(nil, uint64(len(s))))
	h.Write([]byte(s))
}
