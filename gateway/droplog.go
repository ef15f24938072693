package gateway

import (
	"log/slog"
	"sync"
	"time"
)

// dropLog logs the values of the store that are not the gateway's (they
// do not open: forged, altered, moved), at most once per 10 s with how
// many there were since: whoever writes the store cannot flood the log.
// It is safe for concurrent use.
type dropLog struct {
	logger *slog.Logger
	msg    string

	mu      sync.Mutex
	dropped int       // values dropped since last
	last    time.Time // when the log was last written
}

// drop counts one value dropped (err says why; key, if any, names it).
func (d *dropLog) drop(key string, err error) {
	d.mu.Lock()
	d.dropped++
	now := time.Now()
	if now.Sub(d.last) < 10*time.Second {
		d.mu.Unlock()
		return
	}
	n := d.dropped
	d.dropped, d.last = 0, now
	d.mu.Unlock()
	d.logger.Warn(d.msg, "count", n, "last", key, "err", err)
}
