package auth

import (
	"crypto/sha256"
	"sync"
	"time"
)

// maxCacheEntries bounds each cache of this package.
const maxCacheEntries = 10000

// tokenKey is the cache key of a token: its SHA-256, so that caches never
// hold raw tokens.
func tokenKey(tok string) [32]byte { return sha256.Sum256([]byte(tok)) }

// ttlCache maps token hashes to values until a per-entry deadline. It is
// safe for concurrent use and holds at most maxCacheEntries entries.
type ttlCache[V any] struct {
	mu sync.Mutex
	m  map[[32]byte]cacheEntry[V]
}

type cacheEntry[V any] struct {
	v   V
	exp time.Time
}

func (c *ttlCache[V]) get(k [32]byte, now time.Time) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[k]
	if !ok || !now.Before(e.exp) {
		if ok {
			delete(c.m, k)
		}
		var zero V
		return zero, false
	}
	return e.v, true
}

func (c *ttlCache[V]) put(k [32]byte, v V, exp, now time.Time) {
	if !now.Before(exp) {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = make(map[[32]byte]cacheEntry[V])
	}
	if _, ok := c.m[k]; !ok && len(c.m) >= maxCacheEntries {
		for key, e := range c.m {
			if !now.Before(e.exp) {
				delete(c.m, key)
			}
		}
		for key := range c.m {
			if len(c.m) < maxCacheEntries {
				break
			}
			delete(c.m, key)
		}
	}
	c.m[k] = cacheEntry[V]{v: v, exp: exp}
}

func (c *ttlCache[V]) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m)
}
