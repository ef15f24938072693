package sign

import (
	"bytes"
	"encoding/hex"
	"testing"
	"time"

	"github.com/mcphandler/mcphandler/internal/golden"
)

// The golden files of testdata/golden hold, byte for byte, a signed
// record, a signed message and a tag: every record and message replicas
// exchange through the store is one of these (each purpose's is pinned by
// its package), and replicas of two releases verify each other's during a
// rolling upgrade. Each case signs with fixed keys and time, compares the
// value with its file, then verifies the file, with the keys of a
// replica that signs with a newer key too.
//
// go test -run TestGolden -update rewrites the files: only for a change
// that says how mixed releases still interoperate.

var (
	goldenKey    = []byte("mcphandler golden key, 32 bytes!")
	goldenNewKey = []byte("a newer golden key, of 32 bytes!")
	goldenNow    = time.UnixMilli(1_785_231_000_000) // 2026-07-28T09:30:00Z
)

const (
	goldenName    = "golden/record"
	goldenPayload = `{"st":"pending"}`
)

// TestGolden pins the two envelopes of package sign and a tag; see the
// comment at the top of this file.
func TestGolden(t *testing.T) {
	s := mustSigner(t, "golden", goldenKey)
	rotated := mustSigner(t, "golden", goldenNewKey, goldenKey)
	t.Run("record", func(t *testing.T) {
		b := golden.File(t, "record.golden", s.Sign(goldenName, []byte(goldenPayload)))
		for _, v := range []*Signer{s, rotated} {
			if p, err := v.Open(goldenName, b); err != nil || string(p) != goldenPayload {
				t.Errorf("Open: %q, %v", p, err)
			}
		}
	})
	t.Run("message", func(t *testing.T) {
		b := golden.File(t, "message.golden", s.SignMessage("golden-channel", goldenNow, []byte(goldenPayload)))
		for _, v := range []*Signer{s, rotated} {
			if p, err := v.OpenMessage("golden-channel", goldenNow.Add(29*time.Second), 30*time.Second, b); err != nil || string(p) != goldenPayload {
				t.Errorf("OpenMessage: %q, %v", p, err)
			}
		}
	})
	t.Run("tag", func(t *testing.T) {
		tg, err := NewTagger("golden-id", goldenKey)
		if err != nil {
			t.Fatal(err)
		}
		tag := tg.Tag([]byte("GOLDENSESSIONRANDOMPART2344:acme/alice"))
		b := golden.File(t, "tag.golden", []byte(hex.EncodeToString(tag[:])+"\n"))
		want, err := hex.DecodeString(string(bytes.TrimSuffix(b, []byte("\n"))))
		if err != nil {
			t.Fatal(err)
		}
		rt, _ := NewTagger("golden-id", goldenNewKey, goldenKey)
		if !rt.Verify(want, []byte("GOLDENSESSIONRANDOMPART2344:acme/alice")) {
			t.Error("the tag does not verify")
		}
	})
}
