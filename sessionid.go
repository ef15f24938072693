package mcphandler

import (
	"crypto/rand"
	"encoding/base32"
	"strconv"

	"github.com/mcphandler/mcphandler/internal/sign"
)

// A session id names its owner. The session record (package session) is
// not signed: it names its owner, and a request of another identity reads
// the session as unknown, but something that can write the store could
// write the record again with another owner — itself, if it also holds an
// account — and reach the session's calls through it: answer the
// questions its tools wait for, cancel them. So the id carries the tag of
// its owner: a random part (rand.Text, 130 bits) and a tag (sign.Tagger,
// purpose "session-id", over the random part and the owner's key), in
// base32. A request whose identity the tag does not name reads the
// session as unknown (404) before the store is asked. An id without a tag
// (minted by an earlier release) reads as unknown too: its client starts
// a new session, once.
const (
	sessionRandLen = 26 // rand.Text
	sessionIDLen   = sessionRandLen + 16
)

var tagEncoding = base32.StdEncoding.WithPadding(base32.NoPadding)

// newSessionID mints the id of a new session of id.
func (ss *sessions) newSessionID(id Identity) string { return ss.sessionID(rand.Text(), id) }

// randText returns 130 random bits as 26 characters of base32, for ids
// that must be unguessable.
func randText() string { return rand.Text() }

// sessionID is the session id of id with random part r.
func (ss *sessions) sessionID(r string, id Identity) string {
	var buf [320]byte
	tag := ss.macs.sid.Tag(ownerMsg(buf[:0], r, id))
	var enc [16]byte
	tagEncoding.Encode(enc[:], tag[:])
	return r + string(enc[:])
}

// sessionOf reports whether session id sid was minted for id. It
// allocates nothing (for an owner key of up to about 290 bytes).
func (ss *sessions) sessionOf(sid string, id Identity) bool {
	if len(sid) != sessionIDLen {
		return false
	}
	var tag [sign.TagLen]byte
	if n, err := tagEncoding.Decode(tag[:], []byte(sid[sessionRandLen:])); err != nil || n != sign.TagLen {
		return false
	}
	var buf [320]byte
	return ss.macs.sid.Verify(tag[:], ownerMsg(buf[:0], sid[:sessionRandLen], id))
}

// ownerMsg appends what a session id's tag covers: its random part and
// the owner's key (Identity.key).
func ownerMsg(b []byte, random string, id Identity) []byte {
	b = append(b, random...)
	b = strconv.AppendInt(b, int64(len(id.Tenant)), 10)
	b = append(b, ':')
	b = append(b, id.Tenant...)
	b = append(b, '/')
	return append(b, id.Subject...)
}
