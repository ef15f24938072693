package mcphandler

import (
	"bytes"
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/mcphandler/mcphandler/session"
)

// resume serves a GET that carries Last-Event-ID for one of the session's
// POST streams: the logged events after that id, then the live ones, until
// the stream's response. It reports false when last names no logged
// stream of this session, so that the GET opens the standalone stream.
//
// Every entry and live copy is verified (see eventLog); one that does not
// verify is dropped. The live copies only bring events sooner: the log is
// read again every confirmPoll, so a lost message costs latency. Meanwhile
// the confirm the stream carries, if any, is looked after (watchConfirm):
// a call whose asker or runner is gone is finished or reported here.
//
// See https://modelcontextprotocol.io/specification/2025-11-25/basic/transports#resumability-and-redelivery.
func (h *Handler) resume(w http.ResponseWriter, rq *request, last string) bool {
	streamID, after, ok := parseLastEventID(last)
	if !ok {
		return false
	}
	ctx, sid := rq.r.Context(), rq.sess.ID
	channel, key := eventChannel(sid, streamID), eventKey(sid, streamID)
	live, err := h.cfg.Store.Subscribe(ctx, channel)
	if err != nil {
		return false
	}
	defer live.Close()
	evs, err := h.events(ctx, key, 0)
	if err != nil || len(evs) == 0 {
		return false // unknown or expired: not ours to resume
	}
	hdr := w.Header()
	hdr.Set("Content-Type", "text/event-stream")
	hdr.Set("Cache-Control", "no-cache")
	hdr.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	rc.Flush()
	seen := after
	// write sends one logged entry; it reports true once the response went.
	write := func(seq uint64, entry []byte) (final, ok bool) {
		if seq <= seen || len(entry) == 0 {
			return false, true
		}
		seen = seq
		if entry[0] != evMessage && entry[0] != evFinal {
			return false, true
		}
		id := strconv.AppendUint(append([]byte(streamID), '-'), seq, 10)
		if _, err := w.Write(appendEvent(nil, id, entry[1:])); err != nil || rc.Flush() != nil {
			return false, false
		}
		return entry[0] == evFinal, true
	}
	writeAll := func(evs []session.Event) bool {
		for _, ev := range evs {
			if final, ok := write(ev.Seq, ev.Data); final || !ok {
				return true
			}
		}
		return false
	}
	if writeAll(evs) {
		return true
	}
	tick := time.NewTicker(h.cfg.KeepAlive)
	defer tick.Stop()
	watch := time.NewTicker(h.ct.poll)
	defer watch.Stop()
	for {
		select {
		case <-ctx.Done():
			return true
		case <-watch.C:
			h.watchConfirm(rq, streamID)
			if evs, err := h.events(ctx, key, seen); err == nil && writeAll(evs) {
				return true
			}
		case <-tick.C:
			if _, err := w.Write([]byte(":\n\n")); err != nil || rc.Flush() != nil {
				return true
			}
		case b, ok := <-live.C():
			if !ok {
				return true
			}
			p, ok := h.openMessage(h.macs.event, channel, b)
			if !ok {
				continue
			}
			sp := bytes.IndexByte(p, ' ')
			seq, err := strconv.ParseUint(string(p[:max(sp, 0)]), 10, 64)
			if sp < 0 || err != nil {
				continue
			}
			if seq > seen+1 {
				// An earlier event's live copy was lost: read the log.
				if evs, err := h.events(ctx, key, seen); err == nil && writeAll(evs) {
					return true
				}
				continue
			}
			if final, ok := write(seq, p[sp+1:]); final || !ok {
				return true
			}
		}
	}
}

// events returns the verified entries of the event log key after seq
// after; entries that do not verify are dropped.
func (h *Handler) events(ctx context.Context, key string, after uint64) ([]session.Event, error) {
	evs, err := h.cfg.Store.EventsAfter(ctx, key, after)
	if err != nil {
		return nil, err
	}
	out := evs[:0]
	for _, ev := range evs {
		if p, ok := h.openRecord(h.macs.event, key, ev.Data); ok {
			out = append(out, session.Event{Seq: ev.Seq, Data: p})
		}
	}
	return out, nil
}

// parseLastEventID splits the Last-Event-ID of an event of a POST stream,
// "<stream>-<seq>", into the stream id and the sequence number after which
// to resume. Stream ids are "p" and 16 lowercase hex digits (see
// stream.streamID), so anything else — including a header of any length
// that merely looks alike — is not a POST stream's id and reports false,
// without reaching the store. Its cost is linear in len(last).
func parseLastEventID(last string) (streamID string, after uint64, ok bool) {
	const idLen = 17 // "p" + 16 hex digits
	if len(last) < idLen+2 || len(last) > idLen+21 || last[0] != 'p' || last[idLen] != '-' {
		return "", 0, false
	}
	for _, c := range []byte(last[1:idLen]) {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return "", 0, false
		}
	}
	seq := last[idLen+1:]
	if seq[0] == '+' {
		return "", 0, false
	}
	after, err := strconv.ParseUint(seq, 10, 64)
	if err != nil {
		return "", 0, false
	}
	return last[:idLen], after, true
}
