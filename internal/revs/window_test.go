package revs

import (
	"testing"
	"time"
)

// Values of several keys interleave; a copy of any, or an older one, is
// refused; a key is forgotten only once silent for longer than Span, and
// the memory stays within Max.
func TestWindow(t *testing.T) {
	w := Window[int]{Span: 30 * time.Second, Max: 4096}
	now := time.UnixMilli(1_800_000_000_000)
	for n := uint64(1); n <= 3; n++ {
		for k := range 3 {
			if !w.Take(k, n, now) {
				t.Fatalf("key %d count %d refused", k, n)
			}
		}
	}
	for k := range 3 {
		for n := uint64(1); n <= 3; n++ {
			if w.Take(k, n, now.Add(w.Span)) {
				t.Fatalf("key %d count %d taken twice", k, n)
			}
		}
	}
	later := now.Add(2 * w.Span)
	for k := 100; k < 5100; k++ {
		if !w.Take(k, 1, later) {
			t.Fatal("a new key refused")
		}
		if w.Len() > w.Max {
			t.Fatalf("%d keys remembered, Max %d", w.Len(), w.Max)
		}
	}
	if !w.Take(0, 1, later) {
		t.Fatal("a key silent past Span was not forgotten")
	}
}
