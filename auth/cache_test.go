package auth

import (
	"strconv"
	"testing"
	"time"
)

// TestCacheBounded: each cache of this package (introspected tokens,
// exchanged tokens) holds at most maxCacheEntries entries, however many
// distinct tokens arrive while every entry is still valid; an entry
// cached last is found.
func TestCacheBounded(t *testing.T) {
	var c ttlCache[int]
	now := time.Now()
	for i := range maxCacheEntries + 500 {
		c.put(tokenKey(strconv.Itoa(i)), i, now.Add(time.Hour), now)
	}
	if n := c.len(); n > maxCacheEntries {
		t.Fatalf("%d entries, at most %d", n, maxCacheEntries)
	}
	last := maxCacheEntries + 499
	if v, ok := c.get(tokenKey(strconv.Itoa(last)), now); !ok || v != last {
		t.Fatalf("the last entry: %v %v", v, ok)
	}
}
