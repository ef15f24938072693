package mcphandler

import (
	"bytes"
	"testing"
	"time"
)

// marked returns the value v as writer w's next, written at now.
func marked(w *writerMark, v string) []byte {
	return append(w.appendNext(nil, time.UnixMilli(1_800_000_000_000)), v...)
}

// A log written by one writer and then another (the replica that took
// the call over) is read in full; a copy of any entry, an entry moved
// behind a later one of its writer, or an entry of the first writer after
// the second's, is not taken.
func TestLogOrder(t *testing.T) {
	var a, b writerMark
	a1, a2, a3 := marked(&a, "1"), marked(&a, "2"), marked(&a, "3")
	b1, b2 := marked(&b, "4"), marked(&b, "5")
	for _, tc := range []struct {
		name string
		log  [][]byte
		want string
	}{
		{"genuine", [][]byte{a1, a2, a3, b1, b2}, "12345"},
		{"copied", [][]byte{a1, a2, a1, a2, a3, b1, b1, b2, b2}, "12345"},
		{"reordered", [][]byte{a2, a1, a3, b2, b1}, "235"},
		{"earlier writer after a later", [][]byte{a1, b1, a2, b2, a3}, "145"},
		{"unmarked, from an earlier release", [][]byte{[]byte("x"), a1, []byte("x"), a2}, "x1x2"},
	} {
		var o logOrder
		var got []byte
		for _, e := range tc.log {
			m, rest := readMark(e)
			if o.take(m) {
				got = append(got, rest...)
			}
		}
		if string(got) != tc.want {
			t.Errorf("%s: took %q, want %q", tc.name, got, tc.want)
		}
	}
}

// Messages of several writers interleave; a copy of any is refused, and a
// writer is forgotten only once its copies would be stale anyway.
func TestMsgOrder(t *testing.T) {
	var o msgOrder
	now := time.UnixMilli(1_800_000_000_000)
	ws := make([]writerMark, 3)
	var sent [][]byte
	for i := range 9 {
		sent = append(sent, marked(&ws[i%3], "m"))
	}
	for i, b := range sent {
		if m, _ := readMark(b); !o.take(m, now) {
			t.Fatalf("message %d refused", i)
		}
	}
	for i, b := range sent {
		if m, _ := readMark(b); o.take(m, now.Add(messageWindow)) {
			t.Fatalf("message %d taken twice", i)
		}
	}
	// Many writers later, the first ones, silent for longer than the
	// window, are forgotten, and the memory stays bounded.
	later := now.Add(2 * messageWindow)
	for range 5000 {
		var w writerMark
		if m, _ := readMark(marked(&w, "m")); !o.take(m, later) {
			t.Fatal("a new writer's message refused")
		}
	}
	if n := o.w.Len(); n > maxMsgWriters {
		t.Fatalf("%d writers remembered, bound %d", n, maxMsgWriters)
	}
	if m, _ := readMark(sent[0]); !o.take(m, later) {
		t.Fatal("a writer silent past the window was not forgotten")
	}
}

// Whatever the bytes (a value is verified before it is read, but is read
// like client input), readMark and the orders never panic, and never take
// one marked value twice.
func FuzzMarks(f *testing.F) {
	var w writerMark
	f.Add(marked(&w, `M{"jsonrpc":"2.0"}`), marked(&w, "F{}"))
	f.Add([]byte("s"), []byte("M{}"))
	f.Add(bytes.Repeat([]byte{'s'}, markLen), []byte{})
	f.Fuzz(func(t *testing.T, a, b []byte) {
		var lo logOrder
		var mo msgOrder
		now := time.UnixMilli(1_800_000_000_000)
		for _, v := range [][]byte{a, b, a, b} {
			m, rest := readMark(v)
			if m.marked && len(rest) != len(v)-markLen {
				t.Fatalf("mark of %q leaves %q", v, rest)
			}
			lo.take(m)
			mo.take(m, now)
		}
		if m, _ := readMark(a); m.marked && (lo.take(m) || mo.take(m, now)) {
			t.Fatalf("%q taken twice", a)
		}
	})
}
