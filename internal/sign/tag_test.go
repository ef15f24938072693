package sign

import (
	"testing"
)

// A tag verifies for its message only, under its purpose, with every key
// of a rotation; a changed message, tag or purpose does not.
func TestTagger(t *testing.T) {
	a, err := NewTagger("session-id", secretA)
	if err != nil {
		t.Fatal(err)
	}
	msg := []byte("RANDOM26CHARACTERSXXXXXXXX4:acme/alice")
	tag := a.Tag(msg)
	if !a.Verify(tag[:], msg) {
		t.Fatal("a tag does not verify")
	}
	other := []byte("RANDOM26CHARACTERSXXXXXXXX6:globex/carol")
	if a.Verify(tag[:], other) {
		t.Fatal("a tag verified for another owner")
	}
	for i := range tag {
		b := tag
		b[i] ^= 1
		if a.Verify(b[:], msg) {
			t.Fatalf("byte %d flipped: verified", i)
		}
	}
	if a.Verify(tag[:TagLen-1], msg) {
		t.Fatal("a truncated tag verified")
	}
	p, _ := NewTagger("other", secretA)
	if p.Verify(tag[:], msg) {
		t.Fatal("verified for another purpose")
	}
	rotated, _ := NewTagger("session-id", secretB, secretA)
	if !rotated.Verify(tag[:], msg) {
		t.Fatal("a tag of the old key after rotation")
	}
	if nt := rotated.Tag(msg); a.Verify(nt[:], msg) {
		t.Fatal("the new key does not tag")
	}
}

func TestTaggerAllocs(t *testing.T) {
	a, _ := NewTagger("session-id", secretA, secretB)
	msg := []byte("RANDOM26CHARACTERSXXXXXXXX4:acme/alice")
	tag := a.Tag(msg)
	if n := testing.AllocsPerRun(100, func() {
		var buf [64]byte
		m := append(buf[:0], msg...)
		if !a.Verify(tag[:], m) {
			t.Fatal("no")
		}
	}); n != 0 && !raceEnabled {
		t.Fatalf("Verify allocates %v times", n)
	}
}
