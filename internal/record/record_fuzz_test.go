package record

import (
	"testing"
	"time"

	"github.com/mcphandler/mcphandler/session"
)

// FuzzLoad feeds arbitrary store bytes, signed for the key and not, to
// Load: it never panics, refuses what does not check, and what it accepts
// is a valid record whose revision it remembers.
func FuzzLoad(f *testing.F) {
	f.Add([]byte(`{"st":"new","n":1,"rev":1}`), true)
	f.Add([]byte(`{"st":"new","rev":18446744073709551615,"x":1}`), true)
	f.Add([]byte(`{"st":"","n":-1}`), true)
	f.Add([]byte(`r0000`), false)
	f.Fuzz(func(t *testing.T, b []byte, signed bool) {
		w := &world{t: t, store: session.NewMemory()}
		k, _ := w.process()
		if signed {
			b = k.Signer.Sign("thing/f", b)
		}
		if ok, err := w.store.PutIfAbsent(t.Context(), "thing/f", b, time.Minute); !ok || err != nil {
			t.Skip()
		}
		v, raw, err := k.Load(t.Context(), "thing/f")
		if err != nil {
			if raw != nil || v != (thing{}) {
				t.Fatalf("refused, but returned %+v, %q", v, raw)
			}
			return
		}
		if !v.Valid() || string(raw) != string(b) {
			t.Fatalf("accepted %+v from %q", v, b)
		}
		if k.Revs.Len() != 1 {
			t.Fatalf("accepted revision %d not remembered", v.Rev)
		}
	})
}
