package mcphandler

import (
	"crypto/sha256"
	"encoding/hex"
	"hash/maphash"
	"sync"
)

// Skill manifests carry the sha256 digest of every file, on every
// skills/list and skills/get: for large files, hashing them is most of the
// cost of the answer. digestCache remembers digests by what identifies
// the content: a keyed 64-bit hash (hash/maphash, seeded at random per
// Handler) of the caller's tenant and the bytes, and their length. Every
// request hashes the bytes the hook returned for it with maphash, many
// times faster than sha256, so a host that returns other content — a new
// slice, or the same slice rewritten in place — gets the digest of that
// content, never a stale one (unless the two contents collide in 64 keyed
// bits, which a party that does not know the seed cannot aim for). The
// tenant in the key keeps one tenant from learning, by timing, that
// another was served the same bytes.
//
// The cache holds at most skillDigestCacheSize digests (about 150 bytes
// each, so some 600 KiB); past it an arbitrary one is dropped for each one
// added. Files shorter than digestCacheMin bytes are hashed directly:
// caching them would cost more than it saves. It is safe for concurrent
// use.
type digestCache struct {
	once sync.Once // sets seed and m: the zero digestCache is ready to use
	seed maphash.Seed

	mu sync.Mutex // guards m
	m  map[digestKey]string
}

// The bounds of the digest cache.
const (
	skillDigestCacheSize = 4096
	digestCacheMin       = 1024
)

type digestKey struct {
	sum  uint64
	size int
}

func (c *digestCache) init() {
	c.seed, c.m = maphash.MakeSeed(), make(map[digestKey]string)
}

// digest returns "sha256:" and the hex sha256 of content, served to tenant.
func (c *digestCache) digest(tenant string, content []byte) string {
	if len(content) < digestCacheMin {
		return sha256Digest(content)
	}
	c.once.Do(c.init)
	var mh maphash.Hash
	mh.SetSeed(c.seed)
	mh.WriteString(tenant)
	mh.WriteByte(0) // no tenant name is a prefix of another's key
	mh.Write(content)
	k := digestKey{mh.Sum64(), len(content)}
	c.mu.Lock()
	d, ok := c.m[k]
	c.mu.Unlock()
	if ok {
		return d
	}
	d = sha256Digest(content)
	c.mu.Lock()
	if len(c.m) >= skillDigestCacheSize {
		for old := range c.m {
			delete(c.m, old)
			break
		}
	}
	c.m[k] = d
	c.mu.Unlock()
	return d
}

func sha256Digest(content []byte) string {
	sum := sha256.Sum256(content)
	return "sha256:" + hex.EncodeToString(sum[:])
}
