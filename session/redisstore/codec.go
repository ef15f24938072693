package redisstore

import (
	"encoding/binary"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/mcphandler/mcphandler/session"
)

// The first byte of a session record is its version. A record of another
// version is not ours (or from an incompatible release) and reads as not
// found.
const (
	// recordV1 records hold the capabilities as the bits of a
	// session.Capabilities, as numbered when they were written (see
	// v1Caps). They are read, never written.
	recordV1 = 1
	// recordV2 records hold the capabilities by name (see capNames).
	recordV2 = 2

	// recordVersion is the version encodeSession writes.
	recordVersion = recordV2
)

// capNames are the names under which version-2 records keep capabilities.
// A stored name keeps its meaning forever: never rename one or reuse a
// retired one. A new capability gets a new name and needs no new record
// version, since readers ignore names they do not know.
var capNames = [...]struct {
	name string
	c    session.Capabilities
}{
	{"elicitation.form", session.CapElicitationForm},
	{"elicitation.url", session.CapElicitationURL},
	{"sampling", session.CapSampling},
	{"sampling.tools", session.CapSamplingTools},
	{"roots", session.CapRoots},
	{"roots.listChanged", session.CapRootsListChanged},
	{"ui.mcp-app", session.CapUIApps},
}

// capByName returns the capability stored as name, 0 for a name it does
// not know.
func capByName(name string) session.Capabilities {
	for _, e := range capNames {
		if e.name == name {
			return e.c
		}
	}
	return 0
}

// v1Caps are the capabilities of bits 0, 1, ... of a version-1 record:
// the order of the constants when version 1 was written. Frozen.
var v1Caps = [...]session.Capabilities{
	session.CapElicitationForm,
	session.CapElicitationURL,
	session.CapSampling,
	session.CapSamplingTools,
	session.CapRoots,
	session.CapRootsListChanged,
}

// errCorrupt reports a session record that does not decode.
var errCorrupt = errors.New("redisstore: undecodable session record")

// encodeSession returns the version-2 record of s:
//
//	0x02 <ttl ms> ':' <len(immutable)> ':' immutable mutable
//
// where the TTL in the header is the effective PX, in ASCII for the Lua
// scripts, the immutable part is what Update keeps (the owner) and the
// mutable part what it replaces (every other field); both are sequences of
// uvarint-length-prefixed strings and varints. The capabilities are a
// uvarint count and that many names (capNames), the last of which may be
// s.Created (see createdPrefix); bits of s.Capabilities that name no
// capability are not stored. The ID is not stored: it is the key.
//
// A version-1 record differs only in the capabilities, a uvarint of their
// bits (v1Caps). The header and the immutable part are the same in both,
// which lets the Lua script of Update keep the owner of either and write a
// version-2 record.
func encodeSession(s *session.Session) []byte {
	imm := appendImmutable(make([]byte, 0, 64), s)
	b := make([]byte, 0, 24+len(imm)+48+len(s.LogLevel)+16*len(s.Subscriptions))
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
	b = appendCaps(b, s.Capabilities, s.Created)
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

// createdPrefix starts the entry of the capability list that holds
// Session.Created, in Unix milliseconds. The list is the one place of a
// version-2 record that readers extend without a new version: a release
// that knows no such name ignores it (and an Update from it drops it; the
// session then reads as created at an unknown time).
const createdPrefix = "created="

// appendCaps encodes c as a count and the names of its capabilities,
// followed by the entry of created unless it is zero.
func appendCaps(b []byte, c session.Capabilities, created time.Time) []byte {
	n := 0
	for _, e := range capNames {
		if c.Has(e.c) {
			n++
		}
	}
	if !created.IsZero() {
		n++
	}
	b = binary.AppendUvarint(b, uint64(n))
	for _, e := range capNames {
		if c.Has(e.c) {
			b = appendString(b, e.name)
		}
	}
	if !created.IsZero() {
		var entry [32]byte
		b = appendString(b, string(strconv.AppendInt(append(entry[:0], createdPrefix...), created.UnixMilli(), 10)))
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

// caps decodes the capabilities of a version-2 record, and the creation
// time among them (see createdPrefix): names it does not know (from a
// newer release) are ignored.
func (r *reader) caps() (session.Capabilities, time.Time) {
	n := r.uvarint()
	if n > uint64(len(r.s)) { // every name takes at least a byte
		r.err = true
		r.s = ""
		return 0, time.Time{}
	}
	var c session.Capabilities
	var created time.Time
	for range n {
		name := r.string()
		if ms, ok := strings.CutPrefix(name, createdPrefix); ok {
			if v, err := strconv.ParseInt(ms, 10, 64); err == nil && v > 0 {
				created = time.UnixMilli(v)
			}
			continue
		}
		c |= capByName(name)
	}
	return c, created
}

// capsV1 decodes the capabilities of a version-1 record: bits that named
// no capability then are ignored.
func (r *reader) capsV1() session.Capabilities {
	bits := r.uvarint()
	if bits > 0xffff {
		r.err = true
		return 0
	}
	var c session.Capabilities
	for i, capability := range v1Caps {
		if bits&(1<<i) != 0 {
			c |= capability
		}
	}
	return c
}

// decodeSession decodes a record made by encodeSession, or a version-1
// record. It accepts only a record that is complete and consistent, so a
// foreign or truncated value is never taken for a session.
func decodeSession(id, v string) (*session.Session, error) {
	r := reader{s: v}
	version := r.byte()
	if version != recordV1 && version != recordV2 {
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
	if !r.mutable(s, version) {
		return nil, errCorrupt
	}
	return s, nil
}

// mutable decodes the mutable part of a record of the given version into
// s, and reports whether it was complete and consistent.
func (r *reader) mutable(s *session.Session, version byte) bool {
	s.ProtocolVersion = r.string()
	s.ClientName = r.string()
	s.ClientVersion = r.string()
	if version == recordV1 {
		s.Capabilities = r.capsV1()
	} else {
		s.Capabilities, s.Created = r.caps()
	}
	s.TTL = time.Duration(r.varint())
	flags := r.byte()
	s.Initialized = flags&1 != 0
	s.LogLevel = r.string()
	count := r.uvarint()
	if r.err || flags > 1 || count > uint64(len(r.s)) {
		return false
	}
	if count > 0 {
		s.Subscriptions = make([]string, count)
		for i := range s.Subscriptions {
			s.Subscriptions[i] = r.string()
		}
	}
	return !r.err && len(r.s) == 0
}
