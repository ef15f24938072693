// Package sign authenticates what replicas of the handler exchange through
// a shared store: the records they keep there (confirms, decided nonces,
// event log entries) and the messages they publish (answers,
// cancellations, change notifications, stream events). Anything that can
// write to the store but does not hold the secrets cannot make a record or
// a message that verifies.
//
// A [Signer] serves one purpose ("confirm", "cancel", ...). Its keys are
// derived from the secrets with HKDF-SHA256 under a label per purpose, so
// that a record or message of one purpose never verifies as another, and
// so that the keys are independent of the keys package seal derives from
// the same secrets. The tag is HMAC-SHA256 over the purpose, the name the
// value is stored or published under (the record's key, the message's
// channel), the timestamp of a message and the payload: a value copied to
// another key or channel does not verify.
//
//	record:  'r' | kid[4] | tag[32] | payload
//	message: 'm' | kid[4] | unix ms[8] | tag[32] | payload
//
// Keys rotate like those of package seal: the first secret signs, every
// secret verifies, and the key id selects the key.
package sign

import (
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"time"
)

// MinSecretLen is the minimum length in bytes of each secret.
const MinSecretLen = 32

const (
	kidLen    = 4
	tagLen    = sha256.Size
	tsLen     = 8
	recordTag = 'r'
	msgTag    = 'm'
	label     = "mcphandler/mac/v1 "
	domain    = "mcphandler/mac/v1\x00"
)

// RecordOverhead and MessageOverhead are how many bytes signing adds.
const (
	RecordOverhead  = 1 + kidLen + tagLen
	MessageOverhead = 1 + kidLen + tsLen + tagLen
)

// Errors of Open and OpenMessage. Callers treat them all alike: the value
// is not theirs.
var (
	ErrMalformed  = errors.New("sign: malformed value")
	ErrUnknownKey = errors.New("sign: unknown key")
	ErrForged     = errors.New("sign: authentication failed")
	ErrStale      = errors.New("sign: message outside its freshness window")
)

type key struct {
	kid [kidLen]byte
	mac []byte // the HMAC key
}

// Signer signs and verifies the records and messages of one purpose. It
// holds derived keys only, never the secrets, and is safe for concurrent
// use.
type Signer struct {
	purpose string
	keys    []key
}

// NewSigner derives the keys of purpose from secrets, newest first: the
// first signs, all verify. Each secret must be at least MinSecretLen bytes.
func NewSigner(purpose string, secrets ...[]byte) (*Signer, error) {
	if purpose == "" {
		return nil, errors.New("sign: empty purpose")
	}
	if len(secrets) == 0 {
		return nil, errors.New("sign: no keys")
	}
	s := &Signer{purpose: purpose, keys: make([]key, 0, len(secrets))}
	for i, secret := range secrets {
		if len(secret) < MinSecretLen {
			return nil, fmt.Errorf("sign: key %d is %d bytes, need at least %d", i, len(secret), MinSecretLen)
		}
		mk, err := hkdf.Key(sha256.New, secret, nil, label+purpose, 32)
		if err != nil {
			return nil, fmt.Errorf("sign: key %d: %w", i, err)
		}
		kid, err := hkdf.Key(sha256.New, secret, nil, label+purpose+" kid", kidLen)
		if err != nil {
			return nil, fmt.Errorf("sign: key %d: %w", i, err)
		}
		var k key
		copy(k.kid[:], kid)
		k.mac = mk
		s.keys = append(s.keys, k)
	}
	return s, nil
}

// tag computes the tag of payload under k for name and the message time ts
// (0 for records). Every variable part is length-prefixed.
func (s *Signer) tag(dst []byte, k *key, typ byte, name string, ts uint64, payload []byte) []byte {
	m := hmac.New(sha256.New, k.mac)
	var head [64]byte
	b := append(head[:0], domain...)
	b = append(b, typ)
	b = binary.AppendUvarint(b, uint64(len(s.purpose)))
	m.Write(b)
	m.Write([]byte(s.purpose))
	b = binary.AppendUvarint(head[:0], uint64(len(name)))
	m.Write(b)
	m.Write([]byte(name))
	b = binary.BigEndian.AppendUint64(head[:0], ts)
	b = binary.AppendUvarint(b, uint64(len(payload)))
	m.Write(b)
	m.Write(payload)
	return m.Sum(dst)
}

func (s *Signer) find(kid []byte) *key {
	for i := range s.keys {
		if hmac.Equal(s.keys[i].kid[:], kid) {
			return &s.keys[i]
		}
	}
	return nil
}

// Sign returns payload signed as the record stored under name.
func (s *Signer) Sign(name string, payload []byte) []byte {
	k := &s.keys[0]
	out := make([]byte, 0, RecordOverhead+len(payload))
	out = append(out, recordTag)
	out = append(out, k.kid[:]...)
	out = s.tag(out, k, recordTag, name, 0, payload)
	return append(out, payload...)
}

// Open verifies that b is a record signed for name and returns its
// payload, which aliases b.
func (s *Signer) Open(name string, b []byte) ([]byte, error) {
	if len(b) < RecordOverhead || b[0] != recordTag {
		return nil, ErrMalformed
	}
	k := s.find(b[1 : 1+kidLen])
	if k == nil {
		return nil, ErrUnknownKey
	}
	payload := b[RecordOverhead:]
	var buf [tagLen]byte
	if !hmac.Equal(s.tag(buf[:0], k, recordTag, name, 0, payload), b[1+kidLen:RecordOverhead]) {
		return nil, ErrForged
	}
	return payload, nil
}

// SignMessage returns payload signed as a message published on channel at
// now.
func (s *Signer) SignMessage(channel string, now time.Time, payload []byte) []byte {
	k := &s.keys[0]
	ts := uint64(now.UnixMilli())
	out := make([]byte, 0, MessageOverhead+len(payload))
	out = append(out, msgTag)
	out = append(out, k.kid[:]...)
	out = binary.BigEndian.AppendUint64(out, ts)
	out = s.tag(out, k, msgTag, channel, ts, payload)
	return append(out, payload...)
}

// OpenMessage verifies that b is a message signed for channel less than
// window before or after now, and returns its payload, which aliases b.
// The window bounds replays: a genuine message copied later is refused.
func (s *Signer) OpenMessage(channel string, now time.Time, window time.Duration, b []byte) ([]byte, error) {
	if len(b) < MessageOverhead || b[0] != msgTag {
		return nil, ErrMalformed
	}
	k := s.find(b[1 : 1+kidLen])
	if k == nil {
		return nil, ErrUnknownKey
	}
	ts := binary.BigEndian.Uint64(b[1+kidLen:])
	payload := b[MessageOverhead:]
	var buf [tagLen]byte
	if !hmac.Equal(s.tag(buf[:0], k, msgTag, channel, ts, payload), b[1+kidLen+tsLen:MessageOverhead]) {
		return nil, ErrForged
	}
	if ts > 1<<62 {
		return nil, ErrStale
	}
	d := now.Sub(time.UnixMilli(int64(ts)))
	if d > window || d < -window {
		return nil, ErrStale
	}
	return payload, nil
}
