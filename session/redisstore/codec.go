package redisstore

import (
	"encoding/binary"
	"errors"
	"strconv"
	"time"

	"github.com/mcphandler/mcphandler/session"
)

// recordVersion is the first byte of every session record. A record with
// another first byte is not ours (or from an incompatible version) and
// reads as not found.
const recordVersion = 1

// errCorrupt reports a session record that does not decode.
var errCorrupt = errors.New("redisstore: undecodable session record")

// encodeSession returns the record of s:
//
//	0x01 <ttl ms> ':' <len(immutable)> ':' immutable mutable
//
// where the TTL in the header is the effective PX, in ASCII for the Lua
// scripts, the immutable part is what Update keeps (the owner) and the
// mutable part what it replaces (every other field); both are sequences of
// uvarint-length-prefixed strings and varints. The ID is not stored: it is
// the key.
func encodeSession(s *session.Session) []byte {
	imm := appendImmutable(make([]byte, 0, 64), s)
	b := make([]byte, 0, 24+len(imm)+16+len(s.LogLevel)+16*len(s.Subscriptions))
	b = append(b, recordVersion)
	b = strconv.AppendInt(b, millis(ttlOf(s)), 10)
	b = append(b, ':')
	b = strconv.AppendInt(b, int64(len(imm)), 10)
	b = append(b, ':')
	b = append(b, imm...)
	return appendMutable(b, s)
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// appendImmutable encodes the fields fixed at Create: the owner (the ID is
// the key).
func appendImmutable(b []byte, s *session.Session) []byte {
	return appendString(b, s.Owner)
}

// appendMutable encodes the fields Update replaces: all the others.
func appendMutable(b []byte, s *session.Session) []byte {
	b = appendString(b, s.ProtocolVersion)
	b = appendString(b, s.ClientName)
	b = appendString(b, s.ClientVersion)
	b = binary.AppendUvarint(b, uint64(s.Capabilities))
	b = binary.AppendVarint(b, int64(s.TTL))
	var flags byte
	if s.Initialized {
		flags |= 1
	}
	b = append(b, flags)
	b = appendString(b, s.LogLevel)
	b = binary.AppendUvarint(b, uint64(len(s.Subscriptions)))
	for _, u := range s.Subscriptions {
		b = appendString(b, u)
	}
	return b
}

// reader decodes a record held in a string without copying it first.
type reader struct {
	s   string
	err bool
}

func (r *reader) uvarint() uint64 {
	var x uint64
	for i := 0; i < binary.MaxVarintLen64; i++ {
		if i >= len(r.s) {
			break
		}
		c := r.s[i]
		if c < 0x80 {
			if i == binary.MaxVarintLen64-1 && c > 1 {
				break
			}
			r.s = r.s[i+1:]
			return x | uint64(c)<<(7*i)
		}
		x |= uint64(c&0x7f) << (7 * i)
	}
	r.err = true
	r.s = ""
	return 0
}

func (r *reader) varint() int64 {
	u := r.uvarint()
	x := int64(u >> 1)
	if u&1 != 0 {
		x = ^x
	}
	return x
}

func (r *reader) string() string {
	n := r.uvarint()
	if n > uint64(len(r.s)) {
		r.err = true
		r.s = ""
		return ""
	}
	v := r.s[:n]
	r.s = r.s[n:]
	return v
}

func (r *reader) byte() byte {
	if len(r.s) == 0 {
		r.err = true
		return 0
	}
	c := r.s[0]
	r.s = r.s[1:]
	return c
}

// header parses "<digits>:" and returns the number.
func (r *reader) header() int64 {
	for i := 0; i < len(r.s) && i <= 18; i++ {
		c := r.s[i]
		if c == ':' && i > 0 {
			n, err := strconv.ParseInt(r.s[:i], 10, 64)
			if err != nil {
				break
			}
			r.s = r.s[i+1:]
			return n
		}
		if c < '0' || c > '9' {
			break
		}
	}
	r.err = true
	r.s = ""
	return 0
}

// decodeSession decodes a record made by encodeSession. It accepts only a
// record that is complete and consistent, so a foreign or truncated value
// is never taken for a session.
func decodeSession(id, v string) (*session.Session, error) {
	r := reader{s: v}
	if r.byte() != recordVersion {
		return nil, errCorrupt
	}
	if ms := r.header(); ms <= 0 {
		return nil, errCorrupt
	}
	n := r.header()
	if r.err || n < 0 || n > int64(len(r.s)) {
		return nil, errCorrupt
	}
	s := &session.Session{ID: id}
	imm := reader{s: r.s[:n]}
	r.s = r.s[n:]
	s.Owner = imm.string()
	if imm.err || len(imm.s) != 0 {
		return nil, errCorrupt
	}
	s.ProtocolVersion = r.string()
	s.ClientName = r.string()
	s.ClientVersion = r.string()
	c := r.uvarint()
	s.Capabilities = session.Capabilities(c)
	s.TTL = time.Duration(r.varint())
	flags := r.byte()
	s.Initialized = flags&1 != 0
	s.LogLevel = r.string()
	count := r.uvarint()
	if r.err || c > 0xffff || flags > 1 || count > uint64(len(r.s)) {
		return nil, errCorrupt
	}
	if count > 0 {
		s.Subscriptions = make([]string, count)
		for i := range s.Subscriptions {
			s.Subscriptions[i] = r.string()
		}
	}
	if r.err || len(r.s) != 0 {
		return nil, errCorrupt
	}
	return s, nil
}
