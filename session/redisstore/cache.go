package redisstore

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcphandler/mcphandler/session"
)

// cache keeps, when Options.CacheTTL is positive, the sessions this replica
// read recently, so that most requests of a live session need no Redis
// round trip. Every Update and Delete, on any replica, publishes the
// session id on the store's eviction channel; each replica drops its copy
// when the id arrives. A copy is used for at most CacheTTL (and at most a
// quarter of the session's TTL, so that reads through to Redis keep
// extending its idle lifetime), which bounds staleness even if an eviction
// is lost.
type cache struct {
	ttl time.Duration

	mu      sync.RWMutex // guards entries
	entries map[string]cacheEntry
	ops     int // inserts since the last sweep

	gen atomic.Uint64 // bumped by every eviction; a read that saw it move caches nothing

	startOnce sync.Once
	startErr  error
	sub       session.Subscription
	done      chan struct{} // closed when the eviction goroutine ends
}

type cacheEntry struct {
	s     session.Session
	until time.Time
}

// evictChannel carries the ids of sessions written on some replica (the
// store prefixes it like every channel).
const evictChannel = "store/evict"

// start subscribes to the eviction channel (once) and starts the goroutine
// that applies evictions; the Store owns it and Close ends it.
func (s *Store) startCache(ctx context.Context) error {
	c := s.cache
	c.startOnce.Do(func() {
		sub, err := s.Subscribe(ctx, evictChannel)
		if err != nil {
			c.startErr = err
			return
		}
		c.sub = sub
		c.done = make(chan struct{})
		go func() {
			defer close(c.done)
			for id := range sub.C() {
				c.evict(string(id))
			}
		}()
	})
	return c.startErr
}

func (c *cache) get(id string, now time.Time) (*session.Session, bool) {
	c.mu.RLock()
	e, ok := c.entries[id]
	c.mu.RUnlock()
	if !ok || !now.Before(e.until) {
		return nil, false
	}
	s := e.s
	s.Subscriptions = slices.Clone(e.s.Subscriptions)
	return &s, true
}

// put keeps s unless an eviction happened since gen was read.
func (c *cache) put(s *session.Session, gen uint64, now time.Time) {
	ttl := min(c.ttl, ttlOf(s)/4)
	e := cacheEntry{s: *s, until: now.Add(ttl)}
	e.s.Subscriptions = slices.Clone(s.Subscriptions)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen.Load() != gen {
		return
	}
	if c.ops++; c.ops >= 1024 {
		c.ops = 0
		for k, v := range c.entries {
			if !now.Before(v.until) {
				delete(c.entries, k)
			}
		}
	}
	c.entries[s.ID] = e
}

func (c *cache) evict(id string) {
	c.mu.Lock()
	c.gen.Add(1)
	delete(c.entries, id)
	c.mu.Unlock()
}

// evictEverywhere drops id here and tells the other replicas to drop it.
func (s *Store) evictEverywhere(ctx context.Context, id string) {
	if s.cache == nil {
		return
	}
	s.cache.evict(id)
	s.Publish(ctx, evictChannel, []byte(id))
}

// closeCache ends the eviction goroutine; the Store's Close has closed its
// subscription already.
func (s *Store) closeCache() {
	if s.cache == nil || s.cache.done == nil {
		return
	}
	<-s.cache.done
}
