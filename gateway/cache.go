package gateway

import (
	"crypto/sha256"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"time"

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

// cacheKey says whose list of u this is: its URL and era, the credentials
// sent (every header, sorted) and what the client is said to support.
// Two callers share a list only when the upstream sees the same request
// from both.
func cacheKey(u *Upstream, caps json.RawMessage) [32]byte {
	h := sha256.New()
	write := func(s string) {
		var n [8]byte
		for i, l := 0, len(s); i < 8; i, l = i+1, l>>8 {
			n[i] = byte(l)
		}
		h.Write(n[:])
		h.Write([]byte(s))
	}
	write(u.URL)
	write(string(u.Era))
	names := make([]string, 0, len(u.Header))
	for k := range u.Header {
		names = append(names, strings.ToLower(k))
	}
	slices.Sort(names)
	for _, k := range names {
		write(k)
		for _, v := range u.Header.Values(k) {
			write(v)
		}
	}
	write(string(caps))
	var k [32]byte
	h.Sum(k[:0])
	return k
}
