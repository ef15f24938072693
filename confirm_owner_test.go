package mcphandler

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/mcphandler/mcphandler/internal/ownerindex"
)

// A client that waits the retryAfterMs of a refused confirm is never
// early: the value is rounded up to whole milliseconds, never down, so
// the oldest confirm has stopped counting when the client comes back.
func TestConfirmRefusalRetryRoundsUp(t *testing.T) {
	for _, ahead := range []time.Duration{10700 * time.Microsecond, 2300 * time.Microsecond, 0, -time.Second} {
		oldest := time.Now().Add(ahead)
		e := errTooManyConfirms{&ownerindex.FullError{Held: 100, Max: 100, Oldest: oldest}}.wire(time.Minute)
		left := time.Until(oldest) // no more than when wire measured it
		var data struct{ RetryAfterMs int64 }
		if err := json.Unmarshal(e.Data, &data); err != nil {
			t.Fatal(err)
		}
		if data.RetryAfterMs < 1 || time.Duration(data.RetryAfterMs)*time.Millisecond < left {
			t.Errorf("oldest %v ahead: retryAfterMs %d, but %v were left", ahead, data.RetryAfterMs, left)
		}
	}
}
