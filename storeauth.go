package mcphandler

import (
	"context"
	"sync"
	"time"

	"github.com/mcphandler/mcphandler/internal/revs"
	"github.com/mcphandler/mcphandler/internal/sign"
)

// Everything replicas exchange through the store that could carry a
// decision is authenticated with keys derived from Config.StateKeys (see
// package internal/sign): the records they keep (confirms, decided
// 2026-07-28 nonces, event log entries) and the messages they publish
// (answers, cancellations, change notifications, stream events, session
// stream messages). A record or message that does not verify — forged,
// altered, moved to another key or channel, or a message older than
// messageWindow — is dropped, logged (at most once per dropLogEvery) and
// never acted on: something that can write to the store but does not hold
// the keys cannot answer a confirm, make a tool run, cancel a call or
// inject a notification or event.

// Purposes of the authenticated values; each has its own derived key.
const (
	macConfirm = "confirm" // confirm/<id> records (2025)
	macNonce   = "nonce"   // nonce/<n> records (2026-07-28)
	macEvent   = "event"   // event log entries and their live copies
	macReply   = "reply"   // answers to server requests
	macCancel  = "cancel"  // cancellations relayed between replicas
	macNotify  = "notify"  // change notifications
	macSession = "session" // messages for a session's standalone or legacy stream
	// session ids, tagged with their owner (a Tagger, not a Signer)
	macSessionID = "session-id"
)

// messageWindow is how far a published message's timestamp may be from
// the receiver's clock. It bounds how long a copied genuine message can be
// replayed, and how far replica clocks may drift apart.
const messageWindow = 30 * time.Second

// dropLogEvery bounds how often dropped values are logged.
const dropLogEvery = 10 * time.Second

// macs holds one signer per purpose.
type macs struct {
	confirm, nonce, event, reply, cancel, notify, session *sign.Signer

	// sid tags session ids with their owner (sessionid.go).
	sid *sign.Tagger

	// revs is the newest revision this replica saw of each confirm and
	// nonce record (see recordLife).
	revs revs.Memory

	mu      sync.Mutex // guards dropped and lastLog
	dropped int
	lastLog time.Time
}

func newMACs(secrets [][]byte) (*macs, error) {
	m := &macs{}
	for _, p := range []struct {
		s    **sign.Signer
		name string
	}{
		{&m.confirm, macConfirm}, {&m.nonce, macNonce}, {&m.event, macEvent}, {&m.reply, macReply},
		{&m.cancel, macCancel}, {&m.notify, macNotify}, {&m.session, macSession},
	} {
		s, err := sign.NewSigner(p.name, secrets...)
		if err != nil {
			return nil, err
		}
		*p.s = s
	}
	var err error
	m.sid, err = sign.NewTagger(macSessionID, secrets...)
	return m, err
}

// publish signs payload for channel and publishes it.
func (rb *replicaBus) publish(ctx context.Context, s *sign.Signer, channel string, payload []byte) (int, error) {
	return rb.cfg.Store.Publish(ctx, channel, s.SignMessage(channel, time.Now(), payload))
}

// openMessage verifies a message received on channel and returns its
// payload; a message that does not verify is dropped.
func (rb *replicaBus) openMessage(s *sign.Signer, channel string, b []byte) ([]byte, bool) {
	p, err := s.OpenMessage(channel, time.Now(), messageWindow, b)
	if err != nil {
		rb.dropped(channel, err)
		return nil, false
	}
	return p, true
}

// openRecord verifies a record loaded from key and returns its payload; a
// record that does not verify is dropped.
func (rb *replicaBus) openRecord(s *sign.Signer, key string, b []byte) ([]byte, bool) {
	p, err := s.Open(key, b)
	if err != nil {
		rb.dropped(key, err)
		return nil, false
	}
	return p, true
}

// dropped logs, rate-limited, a value from the store that was refused.
func (rb *replicaBus) dropped(where string, err error) {
	m := rb.macs
	m.mu.Lock()
	m.dropped++
	now := time.Now()
	if now.Sub(m.lastLog) < dropLogEvery {
		m.mu.Unlock()
		return
	}
	n := m.dropped
	m.dropped, m.lastLog = 0, now
	m.mu.Unlock()
	rb.cfg.Logger.Warn("mcphandler: dropped values from the session store that failed verification (forged, altered or replayed)",
		"count", n, "last", clipEcho(where), "err", err)
}

// publishSession sends msg to the session's standalone (or legacy) stream
// on whichever replica holds it. A writer that sends several messages
// (the requests of a legacy session) marks each with w (see sequence.go);
// nil sends it unmarked (sessionEnded, which may arrive any number of
// times).
func (rb *replicaBus) publishSession(ctx context.Context, sid string, w *writerMark, msg []byte) (int, error) {
	if w != nil {
		msg = append(w.appendNext(make([]byte, 0, markLen+len(msg)), time.Now()), msg...)
	}
	return rb.publish(ctx, rb.macs.session, sessionChannel(sid), msg)
}

// openSession verifies a message received on the session's channel and
// returns it unless order took a message of the same writer at or after
// its count (a copy published again within messageWindow).
func (rb *replicaBus) openSession(sid string, order *msgOrder, b []byte) ([]byte, bool) {
	p, ok := rb.openMessage(rb.macs.session, sessionChannel(sid), b)
	if !ok {
		return nil, false
	}
	m, msg := readMark(p)
	return msg, order.take(m, time.Now())
}
