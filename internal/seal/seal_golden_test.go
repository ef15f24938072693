package seal

import (
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/cryptotest"
	"time"

	"github.com/mcphandler/mcphandler/internal/golden"
)

// The golden files of testdata/golden hold, byte for byte, a sealed
// requestState and the argument digests tokens are bound to: a client
// retries a 2026-07-28 request on whichever replica it reaches, so during
// a rolling upgrade a token sealed by one release is opened by the other.
// Each case seals with fixed keys, expiry and nonce (the random source is
// fixed for the test), compares the token with its file, then opens the
// file.
//
// go test -run TestGolden -update rewrites the files: only for a change
// that says how mixed releases still interoperate.

var (
	goldenKey    = []byte("mcphandler golden key, 32 bytes!")
	goldenOldKey = []byte("an older golden key, of 32 bytes")
	goldenNow    = time.UnixMilli(1_785_231_000_000) // 2026-07-28T09:30:00Z
	goldenArgs   = `{"path":"/srv/docs/readme.md","force":true}`
	goldenBind   = Binding{Subject: "alice", Tenant: "acme", Method: "tools/call", Name: "delete_file"}
)

const goldenPayload = `{"a":["elicit-2"],"p":{"elicit-1":{"action":"accept"}},"n":"GOLDENNONCEXRANDOMPART2345","r":2}`

// TestGolden pins a sealed token and argument digests; see the comment
// of update.
func TestGolden(t *testing.T) {
	d, err := Digest([]byte(goldenArgs))
	if err != nil {
		t.Fatal(err)
	}
	b := goldenBind
	b.ArgsDigest = d
	t.Run("token", func(t *testing.T) {
		cryptotest.SetGlobalRandom(t, 24)
		k, err := NewKeys(goldenKey, goldenOldKey)
		if err != nil {
			t.Fatal(err)
		}
		token, err := k.Seal(b, []byte(goldenPayload), goldenNow.Add(2*time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		want := string(golden.File(t, "token.golden", []byte(token)))
		// Every replica opens it, one whose newest key is another too.
		for _, secrets := range [][][]byte{{goldenKey}, {goldenOldKey, goldenKey}} {
			k, _ := NewKeys(secrets...)
			if p, err := k.Open(want, b, goldenNow); err != nil || string(p) != goldenPayload {
				t.Errorf("Open: %q, %v", p, err)
			}
		}
		other := b
		other.Name = "read_file"
		if _, err := k.Open(want, other, goldenNow); !errors.Is(err, ErrTampered) {
			t.Errorf("Open for another tool: %v", err)
		}
		if _, err := k.Open(want, b, goldenNow.Add(2*time.Minute)); !errors.Is(err, ErrExpired) {
			t.Errorf("Open at its expiry: %v", err)
		}
	})
	t.Run("digests", func(t *testing.T) {
		var out strings.Builder
		for _, args := range []string{"", "null", "{}", goldenArgs, `{ "force" : true, "path" : "\/srv\/docs\/readme.md" }`, `{"n":1.0E2,"s":"\u00e9"}`} {
			d, err := Digest([]byte(args))
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&out, "%s %s\n", hex.EncodeToString(d[:]), args)
		}
		for line := range strings.Lines(string(golden.File(t, "digests.golden", []byte(out.String())))) {
			sum, args, _ := strings.Cut(strings.TrimSuffix(line, "\n"), " ")
			if d, err := Digest([]byte(args)); err != nil || hex.EncodeToString(d[:]) != sum {
				t.Errorf("Digest(%s) = %x, %v; the file says %s", args, d, err, sum)
			}
		}
	})
}
