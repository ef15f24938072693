package gateway

import (
	"bytes"
	"testing"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/internal/costguard"
)

// FuzzRelayState: decodeRelayState never panics, takes exactly what
// encode writes (a decoded state encodes to the same bytes), keeps every
// bound, and a state at the bounds fits mcphandler.MaxRoundState.
func FuzzRelayState(f *testing.F) {
	full := relayState{round: maxRelayRounds, bind: relayBinding("docs", "https://up.test/mcp", "search"),
		state: bytes.Repeat([]byte{'s'}, maxRelayedState)}
	for i := range maxRelayedKeys {
		full.keys = append(full.keys, string(bytes.Repeat([]byte{byte('a' + i%26)}, maxRelayedKey-i%3)))
	}
	if n := len(full.encode()); n > mcphandler.MaxRoundState {
		f.Fatalf("a state at the bounds is %d bytes", n)
	}
	for _, s := range []relayState{
		{round: 1, keys: []string{"elicit-1"}, state: []byte(`"v1.abc"`)},
		{round: 3, bind: relayBinding("a", "b", "c"), keys: []string{"", "mcphandler/confirm", "\x00"}},
	} {
		f.Add(s.encode())
	}
	overlong := (&relayState{round: 1, keys: []string{"k"}}).encode()
	overlong = append(overlong[:34:34], append([]byte{0x80, 0x00}, overlong[35:]...)...)
	f.Add(overlong)
	f.Add([]byte{relayVersion, 1})
	f.Add(append([]byte{relayVersion, 9}, make([]byte, 40)...))
	f.Fuzz(func(t *testing.T, in []byte) {
		var s relayState
		var err error
		costguard.Check(t, len(in), func() { s, err = decodeRelayState(in) })
		if err != nil {
			return
		}
		if s.round < 1 || s.round > maxRelayRounds || len(s.state) > maxRelayedState || len(s.keys) < 1 || len(s.keys) > maxRelayedKeys {
			t.Fatalf("out of bounds: round %d, state %d, keys %d", s.round, len(s.state), len(s.keys))
		}
		for _, k := range s.keys {
			if len(k) > maxRelayedKey {
				t.Fatalf("key of %d bytes", len(k))
			}
		}
		if out := s.encode(); !bytes.Equal(out, in) {
			t.Fatalf("decoded %x, encodes as %x", in, out)
		}
	})
}
