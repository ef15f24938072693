package mcphandler

import (
	"bytes"
	"strings"
	"testing"

	"github.com/mcphandler/mcphandler/internal/costguard"
)

// containsKey answers as bytes.Contains, for the names it is given and for
// any other string, wherever and however often (or partly) they occur.
func FuzzContainsKey(f *testing.F) {
	keys := []string{`"inputResponses"`, `"requestState"`, `"progressToken"`, metaProtocolVersion, "", "A", "aA", "Aa", `"_meta"`}
	for _, b := range []string{modernParamsSeed, `{"inputResponses":{}}`, `{"xinputResponses":1,"inputresponses":2}`, `"requestStat"`,
		`Responses"Responses"inputResponses"`, `"requestState`, strings.Repeat(`"input`, 50) + `Responses"`, "io.modelcontextprotocol/protocolVersio"} {
		for _, k := range keys {
			f.Add([]byte(b), k)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte, s string) {
		for _, k := range append(keys, s) {
			var got bool
			costguard.Check(t, len(b)+len(k), func() { got = containsKey(b, k) })
			if want := bytes.Contains(b, []byte(k)); got != want {
				t.Fatalf("containsKey(%q, %q) = %v, bytes.Contains %v", b, k, got, want)
			}
		}
	})
}

const modernParamsSeed = `{"name":"echo","arguments":{"text":"hello"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",` +
	`"io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"bench","version":"1"}},"requestState":"x"}`

// A body made of near matches costs time linear in its size.
func TestContainsKeyCost(t *testing.T) {
	for _, b := range []string{strings.Repeat(`Responses"`, 100000), strings.Repeat(`"inputResponses`, 70000), strings.Repeat("R", 1<<20)} {
		costguard.Check(t, len(b), func() { containsKey([]byte(b), `"inputResponses"`) })
	}
}
