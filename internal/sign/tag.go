package sign

import (
	"crypto/hmac"
	"crypto/sha256"
	"hash"
	"sync"
)

// TagLen is the length in bytes of a [Tagger]'s tags.
const TagLen = 10

// Tagger makes short tags that bind an identifier to what it belongs to
// (a session id to its owner), for values that travel in ids rather than
// in the store: HMAC-SHA256 under a key derived for its purpose exactly
// as a [Signer]'s, truncated to TagLen bytes (80 bits: forging one takes
// about 2^79 guesses, each a request). The first secret tags, every
// secret verifies. It is safe for concurrent use and, once warm,
// allocates nothing per call: its hash states are pooled.
type Tagger struct {
	keys []*tagKey
}

type tagKey struct {
	mac  []byte
	pool sync.Pool // of *tagState
}

type tagState struct {
	h   hash.Hash
	buf []byte
	sum []byte
}

// NewTagger derives the keys of purpose from secrets, newest first, as
// NewSigner does.
func NewTagger(purpose string, secrets ...[]byte) (*Tagger, error) {
	s, err := NewSigner(purpose, secrets...)
	if err != nil {
		return nil, err
	}
	t := &Tagger{keys: make([]*tagKey, len(s.keys))}
	for i := range s.keys {
		t.keys[i] = &tagKey{mac: s.keys[i].mac}
	}
	return t, nil
}

// Tag returns the tag of msg under the first key.
func (t *Tagger) Tag(msg []byte) [TagLen]byte { return t.keys[0].tag(msg) }

// Verify reports whether tag is msg's tag under any key.
func (t *Tagger) Verify(tag, msg []byte) bool {
	ok := false
	for _, k := range t.keys {
		want := k.tag(msg)
		ok = hmac.Equal(want[:], tag) || ok
	}
	return ok
}

func (k *tagKey) tag(msg []byte) (out [TagLen]byte) {
	st, _ := k.pool.Get().(*tagState)
	if st == nil {
		st = &tagState{h: hmac.New(sha256.New, k.mac)}
	}
	st.h.Reset()
	st.buf = append(st.buf[:0], msg...)
	st.h.Write(st.buf)
	st.sum = st.h.Sum(st.sum[:0])
	copy(out[:], st.sum)
	k.pool.Put(st)
	return out
}
