package revs

import "time"

// Window takes, for each key, values in increasing count only: a value
// whose count is not above the last one taken for its key is a copy (or
// older) and is refused. It serves receivers of signed messages, which
// refuse a message older than a freshness window anyway: a key is
// forgotten Span after its last value, and past Max keys heard within
// Span, a quarter of them are (their copies are then bounded by Span
// only). The zero value needs Span and Max set before use; it is not safe
// for concurrent use (each receiver has its own).
type Window[K comparable] struct {
	Span time.Duration
	Max  int

	last    map[K]windowSeen
	pruneAt int
}

type windowSeen struct {
	n  uint64
	at time.Time
}

// Take reports whether count n of key k is new, and takes it if so.
func (w *Window[K]) Take(k K, n uint64, now time.Time) bool {
	if w.last == nil {
		w.last, w.pruneAt = make(map[K]windowSeen), min(64, w.Max)
	}
	if s, ok := w.last[k]; ok && n <= s.n {
		return false
	}
	if len(w.last) >= w.pruneAt {
		for k, s := range w.last {
			if now.Sub(s.at) > w.Span {
				delete(w.last, k)
			}
		}
		for k := range w.last { // still full: forget a quarter
			if len(w.last) < w.Max*3/4 {
				break
			}
			delete(w.last, k)
		}
		w.pruneAt = min(max(64, 2*len(w.last)), w.Max)
	}
	w.last[k] = windowSeen{n: n, at: now}
	return true
}

// Len is how many keys are remembered.
func (w *Window[K]) Len() int { return len(w.last) }
