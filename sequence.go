package mcphandler

import (
	"crypto/rand"
	"encoding/binary"
	"time"

	"github.com/mcphandler/mcphandler/internal/revs"
)

// A signature binds a value to the key or channel it is stored or
// published under, not to its position among the others there. So each
// event log entry and each message of a legacy session's stream also
// carries, signed with it, a mark of who wrote it: the writer (random, one
// per stream object or request) and that writer's count of values, from 1.
// A reader takes each writer's values in increasing count only, so that
// something that can write the store but not sign cannot make a reader
// deliver a genuine value twice or out of its writer's order: a copy, or
// a value moved behind a later one, is dropped.
//
//	marked value: 's' | writer[8] | count[8] | unix ms[8] | value
//
// Values written by earlier releases carry no mark (they never start with
// 's': an entry starts with its kind, a message with '{' or a NUL); they
// are taken as they come, which matters only while such a release writes
// to the same log or channel.
const (
	markTag = 's'
	markLen = 1 + 8 + 8 + 8
)

// writerMark is one writer's mark of its values; the zero value picks its
// writer id at its first value. It is not safe for concurrent use (its
// stream's lock, or its request's, guards it).
type writerMark struct {
	id [8]byte
	n  uint64
}

// appendNext appends the mark of the writer's next value, written at now.
func (w *writerMark) appendNext(b []byte, now time.Time) []byte {
	if w.n == 0 {
		rand.Read(w.id[:])
	}
	w.n++
	b = append(b, markTag)
	b = append(b, w.id[:]...)
	b = binary.BigEndian.AppendUint64(b, w.n)
	return binary.BigEndian.AppendUint64(b, uint64(now.UnixMilli()))
}

// mark is what a reader learns of a value: who wrote it, its count and
// when (zero for a value without a mark).
type mark struct {
	id     [8]byte
	n      uint64
	at     int64
	marked bool
}

// readMark splits a value into its mark and what follows.
func readMark(b []byte) (mark, []byte) {
	if len(b) < markLen || b[0] != markTag {
		return mark{}, b
	}
	var m mark
	copy(m.id[:], b[1:9])
	m.n = binary.BigEndian.Uint64(b[9:17])
	m.at = int64(binary.BigEndian.Uint64(b[17:25]))
	m.marked = true
	return m, b[markLen:]
}

// logOrder takes the entries of one stream's event log in order: a
// writer's entries in increasing count, and the writers one after the
// other — once a new writer's entry is taken (a replica that finished the
// call of a replica that died), no entry of an earlier writer is. Every
// genuine log is written so: one writer at a time, each in order.
type logOrder struct {
	cur  mark      // the last entry taken
	past [][8]byte // the writers before cur's
}

// take reports whether the entry marked m comes after every entry taken so
// far, and takes it if so.
func (o *logOrder) take(m mark) bool {
	switch {
	case !m.marked:
		return true
	case o.cur.marked && m.id == o.cur.id:
		if m.n <= o.cur.n {
			return false
		}
	default:
		for _, id := range o.past {
			if id == m.id {
				return false
			}
		}
		if o.cur.marked && len(o.past) < maxLogWriters {
			o.past = append(o.past, o.cur.id)
		}
	}
	o.cur = m
	return true
}

// maxLogWriters bounds the writers a reader of one log remembers: a
// genuine log has a few (the call's replica, and one per replica that
// finished or reported it).
const maxLogWriters = 16

// msgOrder takes the messages of one channel in increasing count per
// writer; several writers (a legacy session's requests) publish at once. A
// writer is forgotten messageWindow after its last message, when copies of
// its messages are refused as stale anyway, and past maxMsgWriters writers
// heard within that window, a quarter of them are (see revs.Window).
type msgOrder struct {
	w revs.Window[[8]byte]
}

// maxMsgWriters bounds the writers a channel's reader remembers.
const maxMsgWriters = 4096

// take reports whether the message marked m is new, and takes it if so.
func (o *msgOrder) take(m mark, now time.Time) bool {
	if !m.marked {
		return true
	}
	o.w.Span, o.w.Max = messageWindow, maxMsgWriters
	return o.w.Take(m.id, m.n, now)
}
