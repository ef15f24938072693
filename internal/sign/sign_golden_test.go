package sign

import (
	"bytes"
	"encoding/hex"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"
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
var update = flag.Bool("update", false, "rewrite the golden files of testdata/golden from this release's encoders")

func goldenFile(t *testing.T, name string, got []byte) []byte {
	t.Helper()
	path := filepath.Join("testdata", "golden", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return got
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (write it with go test -run %s -update)", err, t.Name())
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s: this release writes other bytes than %s: replicas of the two releases would not understand each other\n got %q\nwant %q",
			name, path, got, want)
	}
	return want
}

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
// comment of update.
func TestGolden(t *testing.T) {
	s := mustSigner(t, "golden", goldenKey)
	rotated := mustSigner(t, "golden", goldenNewKey, goldenKey)
	t.Run("record", func(t *testing.T) {
		b := goldenFile(t, "record.golden", s.Sign(goldenName, []byte(goldenPayload)))
		for _, v := range []*Signer{s, rotated} {
			if p, err := v.Open(goldenName, b); err != nil || string(p) != goldenPayload {
				t.Errorf("Open: %q, %v", p, err)
			}
		}
	})
	t.Run("message", func(t *testing.T) {
		b := goldenFile(t, "message.golden", s.SignMessage("golden-channel", goldenNow, []byte(goldenPayload)))
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
		b := goldenFile(t, "tag.golden", []byte(hex.EncodeToString(tag[:])+"\n"))
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
