package mcphandler

import (
	"bytes"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// resume serves a GET that carries Last-Event-ID for one of the session's
// POST streams: the logged events after that id, then the live ones, until
// the stream's response. It reports false when last names no logged
// stream of this session, so that the GET opens the standalone stream.
//
// See https://modelcontextprotocol.io/specification/2025-11-25/basic/transports#resumability-and-redelivery.
func (h *Handler) resume(w http.ResponseWriter, r *http.Request, sid, last string) bool {
	i := strings.LastIndexByte(last, '-')
	if i <= 1 || last[0] != 'p' {
		return false
	}
	streamID := last[:i]
	after, err := strconv.ParseUint(last[i+1:], 10, 64)
	if err != nil {
		return false
	}
	ctx := r.Context()
	live, err := h.cfg.Store.Subscribe(ctx, eventChannel(sid, streamID))
	if err != nil {
		return false
	}
	defer live.Close()
	evs, err := h.cfg.Store.EventsAfter(ctx, eventKey(sid, streamID), 0)
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
		if entry[0] == evPriming {
			return false, true
		}
		id := strconv.AppendUint(append([]byte(streamID), '-'), seq, 10)
		if _, err := w.Write(appendEvent(nil, id, entry[1:])); err != nil || rc.Flush() != nil {
			return false, false
		}
		return entry[0] == evFinal, true
	}
	for _, ev := range evs {
		if final, ok := write(ev.Seq, ev.Data); final || !ok {
			return true
		}
	}
	tick := time.NewTicker(h.cfg.KeepAlive)
	defer tick.Stop()
	// A confirmed call whose runner died never sends its response: check
	// its lease now and then, and tell the client the outcome is unknown.
	watch := time.NewTicker(runLease / 2)
	defer watch.Stop()
	for {
		select {
		case <-ctx.Done():
			return true
		case <-watch.C:
			if msg := h.watchRunner(ctx, sid, streamID); msg != nil {
				w.Write(appendEvent(nil, nil, msg))
				rc.Flush()
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
			sp := bytes.IndexByte(b, ' ')
			seq, err := strconv.ParseUint(string(b[:max(sp, 0)]), 10, 64)
			if sp < 0 || err != nil {
				continue
			}
			if final, ok := write(seq, b[sp+1:]); final || !ok {
				return true
			}
		}
	}
}
