package otelmcp

import (
	"maps"
	"sync"
	"sync/atomic"
)

// cache keeps values made once per key, for requests to read without a
// lock: a load is a plain map read, hashed by the key type's own hash
// function (a sync.Map hashes its any keys through the runtime's generic
// interface hash, field by field for a struct of strings). A store copies
// the map, so the cache holds at most limit entries (past that, store
// keeps nothing) and its stores copy at most limit²/2 entries over its
// life. Safe for concurrent use.
type cache[K comparable, V any] struct {
	m     atomic.Pointer[map[K]V]
	mu    sync.Mutex // serializes stores
	limit int
}

func (c *cache[K, V]) load(k K) (V, bool) {
	if m := c.m.Load(); m != nil {
		v, ok := (*m)[k]
		return v, ok
	}
	var zero V
	return zero, false
}

// store keeps v for k, unless k is kept already or the cache is full.
func (c *cache[K, V]) store(k K, v V) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var old map[K]V
	if p := c.m.Load(); p != nil {
		old = *p
	}
	if _, ok := old[k]; ok || len(old) >= c.limit {
		return
	}
	m := make(map[K]V, len(old)+1)
	maps.Copy(m, old)
	m[k] = v
	c.m.Store(&m)
}

// all returns what the cache holds, for reading only.
func (c *cache[K, V]) all() map[K]V {
	if p := c.m.Load(); p != nil {
		return *p
	}
	return nil
}
