// Package seal seals and opens the opaque requestState string of MCP
// revision 2026-07-28 multi round-trip requests.
//
// The client must echo requestState byte for byte, but the server has to
// treat what comes back as attacker-controlled (spec mrtr.mdx §Security). A
// sealed token is authenticated and encrypted with AES-256-GCM:
//
//	v1.<base64url(kid | nonce | ciphertext)>     (no padding)
//
// where kid is a 4-byte key id derived from the sealing key, nonce is 12
// random bytes, and ciphertext is GCM over (expiry | payload) with a 16-byte
// tag. The Binding (subject, tenant, method, name and argument digest) is
// never written into the token: it is the AEAD additional data, so a token
// that is replayed under another identity, for another method or tool, or
// with other arguments fails to open exactly as a forged one does. The
// expiry is inside the encrypted plaintext and is checked after
// authentication. The only things a client can learn from a token are the
// key id and the payload length.
//
// Keys rotate: NewKeys takes several secrets, the first one seals and all of
// them open, and the key id in the token selects the key without trying
// every one.
package seal

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"time"
)

// MinSecretLen is the minimum length in bytes of each secret given to
// NewKeys.
const MinSecretLen = 32

// Prefix starts every sealed token and names its format version.
const Prefix = "v1."

const (
	kidLen   = 4
	nonceLen = 12
	tagLen   = 16
	expLen   = 8
	// minRaw is the shortest decoded token: kid, nonce and a sealed empty
	// payload (expiry plus tag).
	minRaw = kidLen + nonceLen + expLen + tagLen

	encInfo  = "mcphandler/seal/v1 aes-256-gcm"
	kidLabel = "kid"
	aadLabel = "mcphandler/seal/v1\x00"
)

// Errors returned by Open. Every token that does not open yields exactly one
// of them; callers that answer the client should not tell them apart (the
// TypeScript SDK answers -32602 "Invalid or expired requestState" to all).
var (
	// ErrMalformed reports a token that is not "v1." followed by canonical
	// unpadded base64url of at least the minimum length.
	ErrMalformed = errors.New("seal: malformed token")
	// ErrUnknownKey reports a token whose key id matches none of the keys.
	ErrUnknownKey = errors.New("seal: unknown key")
	// ErrTampered reports a token that failed authentication: it was altered,
	// forged, or sealed for another Binding (identity, method, name or
	// arguments).
	ErrTampered = errors.New("seal: authentication failed")
	// ErrExpired reports an authentic token whose expiry has passed.
	ErrExpired = errors.New("seal: token expired")
)

// b64 is the token alphabet: URL-safe, unpadded, and strict so that each
// byte string has exactly one accepted encoding.
var b64 = base64.RawURLEncoding.Strict()

// Binding is the context a token is bound to. It is never stored in the
// token; it is authenticated as AEAD additional data, so Open succeeds only
// with the same Binding that Seal was given.
type Binding struct {
	// Subject is the authenticated principal (user, client or workload).
	Subject string
	// Tenant is the tenant the principal acts in, if any.
	Tenant string
	// Method is the JSON-RPC method of the originating request, such as
	// "tools/call".
	Method string
	// Name is the tool or prompt name, or the resource URI.
	Name string
	// ArgsDigest is the Digest of the request arguments, or zero when the
	// method has none.
	ArgsDigest [32]byte
}

// appendAAD appends the additional data for kid and b to dst. Every string
// is length-prefixed, so no two Bindings share an encoding.
func appendAAD(dst []byte, kid *[kidLen]byte, b *Binding) []byte {
	dst = append(dst, aadLabel...)
	dst = append(dst, kid[:]...)
	for _, s := range [...]string{b.Subject, b.Tenant, b.Method, b.Name} {
		dst = binary.AppendUvarint(dst, uint64(len(s)))
		dst = append(dst, s...)
	}
	return append(dst, b.ArgsDigest[:]...)
}

type key struct {
	kid  [kidLen]byte
	aead cipher.AEAD
}

// Keys is a set of sealing keys: the first seals, all open. A Keys holds
// only derived keys, never the secrets themselves, and is safe for
// concurrent use.
type Keys struct {
	keys []key
}

// NewKeys derives a Keys from one or more secrets, newest first. Each secret
// must be at least MinSecretLen bytes of high-entropy key material shared by
// every replica. The first secret seals new tokens; every secret opens, so a
// key is rotated by prepending the new secret and dropping the old one once
// the tokens it sealed have expired.
//
// Each secret gets a key id, the first 4 bytes of HMAC-SHA256(secret,
// "kid"), and an AES-256 key derived with HKDF-SHA256.
func NewKeys(secrets ...[]byte) (*Keys, error) {
	if len(secrets) == 0 {
		return nil, errors.New("seal: no keys")
	}
	k := &Keys{keys: make([]key, 0, len(secrets))}
	for i, s := range secrets {
		if len(s) < MinSecretLen {
			return nil, fmt.Errorf("seal: key %d is %d bytes, need at least %d", i, len(s), MinSecretLen)
		}
		var kk key
		m := hmac.New(sha256.New, s)
		m.Write([]byte(kidLabel))
		copy(kk.kid[:], m.Sum(nil))
		ek, err := hkdf.Key(sha256.New, s, nil, encInfo, 32)
		if err != nil {
			return nil, fmt.Errorf("seal: key %d: %w", i, err)
		}
		block, err := aes.NewCipher(ek)
		if err != nil {
			return nil, fmt.Errorf("seal: key %d: %w", i, err)
		}
		kk.aead, err = cipher.NewGCM(block)
		if err != nil {
			return nil, fmt.Errorf("seal: key %d: %w", i, err)
		}
		k.keys = append(k.keys, kk)
	}
	return k, nil
}

// Seal encrypts payload with the first key, binds it to b and returns the
// token. The token stops opening at expires, which is kept with millisecond
// precision (rounded down) and must not be the zero time. Seal only fails
// when k is nil or empty, expires is zero, or the system random source
// fails.
func (k *Keys) Seal(b Binding, payload []byte, expires time.Time) (string, error) {
	if k == nil || len(k.keys) == 0 {
		return "", errors.New("seal: no keys")
	}
	if expires.IsZero() {
		return "", errors.New("seal: zero expiry")
	}
	s := &k.keys[0]

	// buf = kid | nonce | expiry | payload, sealed in place with room for
	// the tag.
	const head = kidLen + nonceLen
	buf := make([]byte, head+expLen+len(payload), head+expLen+len(payload)+tagLen)
	copy(buf, s.kid[:])
	nonce := buf[kidLen:head]
	if _, err := rand.Read(nonce); err != nil {
		return "", fmt.Errorf("seal: random nonce: %w", err)
	}
	binary.BigEndian.PutUint64(buf[head:], uint64(expires.UnixMilli()))
	copy(buf[head+expLen:], payload)

	var aadBuf [128]byte
	aad := appendAAD(aadBuf[:0], &s.kid, &b)
	sealed := s.aead.Seal(buf[:head], nonce, buf[head:], aad)

	out := make([]byte, len(Prefix)+b64.EncodedLen(len(sealed)))
	copy(out, Prefix)
	b64.Encode(out[len(Prefix):], sealed)
	return string(out), nil
}

// Open authenticates and decrypts token for binding b and returns its
// payload. It returns ErrMalformed, ErrUnknownKey, ErrTampered or ErrExpired
// (compare with errors.Is) and never panics, whatever the token. The token
// is expired when now is at or after its expiry. Authentication is constant
// time (GCM's tag check).
func (k *Keys) Open(token string, b Binding, now time.Time) ([]byte, error) {
	enc, ok := strings.CutPrefix(token, Prefix)
	if !ok || !isB64URL(enc) {
		return nil, ErrMalformed
	}
	raw, err := b64.DecodeString(enc)
	if err != nil || len(raw) < minRaw {
		return nil, ErrMalformed
	}
	if k == nil {
		return nil, ErrUnknownKey
	}
	kid := raw[:kidLen]
	nonce := raw[kidLen : kidLen+nonceLen]
	ct := raw[kidLen+nonceLen:]

	var aadBuf [128]byte
	found := false
	for i := range k.keys {
		kk := &k.keys[i]
		if !bytes.Equal(kk.kid[:], kid) {
			continue
		}
		found = true
		// Open into a fresh buffer: a failed Open clears its output, and a
		// (rare) key id collision means trying the next key on ct.
		pt, err := kk.aead.Open(nil, nonce, ct, appendAAD(aadBuf[:0], &kk.kid, &b))
		if err != nil {
			continue
		}
		if len(pt) < expLen {
			return nil, ErrMalformed // unreachable: minRaw guarantees it
		}
		exp := int64(binary.BigEndian.Uint64(pt))
		if !now.Before(time.UnixMilli(exp)) {
			return nil, ErrExpired
		}
		return pt[expLen:], nil
	}
	if !found {
		return nil, ErrUnknownKey
	}
	return nil, ErrTampered
}

// isB64URL reports whether s holds only base64url alphabet characters. The
// standard decoder silently skips '\r' and '\n'; rejecting them keeps the
// token canonical.
func isB64URL(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '-', c == '_':
		default:
			return false
		}
	}
	return true
}
