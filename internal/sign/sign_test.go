package sign

import (
	"bytes"
	"errors"
	"testing"
	"time"
)

// An attacker with write access to the store flips bytes, moves a record
// to another key, or presents it for another purpose: nothing verifies.
func TestRecordRefusesEveryChange(t *testing.T) {
	s := mustSigner(t, "confirm", secretA)
	rec := s.Sign("confirm/x", []byte(`{"st":"pending"}`))
	if p, err := s.Open("confirm/x", rec); err != nil || string(p) != `{"st":"pending"}` {
		t.Fatalf("Open: %q, %v", p, err)
	}
	for i := range rec {
		b := bytes.Clone(rec)
		b[i] ^= 0x01
		if _, err := s.Open("confirm/x", b); err == nil {
			t.Fatalf("byte %d flipped: verified", i)
		}
	}
	for n := range len(rec) {
		if _, err := s.Open("confirm/x", rec[:n]); err == nil {
			t.Fatalf("truncated to %d bytes: verified", n)
		}
	}
	if _, err := s.Open("confirm/y", rec); !errors.Is(err, ErrForged) {
		t.Fatalf("moved to another key: %v", err)
	}
	other := mustSigner(t, "nonce", secretA)
	if _, err := other.Open("confirm/x", rec); err == nil {
		t.Fatal("verified for another purpose")
	}
	if _, err := mustSigner(t, "confirm", secretB).Open("confirm/x", rec); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("another secret: %v", err)
	}
	// A message never verifies as a record, nor the reverse.
	msg := s.SignMessage("confirm/x", time.Now(), []byte(`{"st":"pending"}`))
	if _, err := s.Open("confirm/x", msg); err == nil {
		t.Fatal("a message verified as a record")
	}
	if _, err := s.OpenMessage("confirm/x", time.Now(), time.Minute, rec); err == nil {
		t.Fatal("a record verified as a message")
	}
}

func TestRotation(t *testing.T) {
	old := mustSigner(t, "cancel", secretA)
	both := mustSigner(t, "cancel", secretB, secretA)
	rec := old.Sign("k", []byte("v"))
	if _, err := both.Open("k", rec); err != nil {
		t.Fatalf("a record of the old key after rotation: %v", err)
	}
	if _, err := old.Open("k", both.Sign("k", []byte("v"))); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("the new key signs: %v", err)
	}
}

// A genuine message replayed later, or dated in the future, is refused.
func TestMessageFreshness(t *testing.T) {
	s := mustSigner(t, "cancel", secretA)
	now := time.UnixMilli(1_800_000_000_000)
	m := s.SignMessage("cancel", now, []byte("sid/1"))
	for _, tc := range []struct {
		at time.Time
		ok bool
	}{
		{now, true},
		{now.Add(29 * time.Second), true},
		{now.Add(-29 * time.Second), true},
		{now.Add(31 * time.Second), false},
		{now.Add(-31 * time.Second), false},
	} {
		_, err := s.OpenMessage("cancel", tc.at, 30*time.Second, m)
		if (err == nil) != tc.ok {
			t.Errorf("at %v: %v", tc.at.Sub(now), err)
		}
	}
	if _, err := s.OpenMessage("notify", now, time.Minute, m); !errors.Is(err, ErrForged) {
		t.Fatalf("moved to another channel: %v", err)
	}
	for i := range m {
		b := bytes.Clone(m)
		b[i] ^= 0x80
		if _, err := s.OpenMessage("cancel", now, time.Minute, b); err == nil {
			t.Fatalf("byte %d flipped: verified", i)
		}
	}
}

func TestNewSignerRefusesShortKeys(t *testing.T) {
	if _, err := NewSigner("x", []byte("short")); err == nil {
		t.Fatal("a short secret was accepted")
	}
	if _, err := NewSigner("x"); err == nil {
		t.Fatal("no secret was accepted")
	}
	if _, err := NewSigner("", secretA); err == nil {
		t.Fatal("an empty purpose was accepted")
	}
}

// FuzzOpen feeds arbitrary store bytes to both openers: no panic, and
// nothing verifies but what the signer made.
func FuzzOpen(f *testing.F) {
	s := mustSigner(f, "event", secretA)
	now := time.UnixMilli(1_800_000_000_000)
	f.Add(s.Sign("events/s/p1", []byte("Mhello")))
	f.Add(s.SignMessage("live/s/p1", now, []byte("1 Mhello")))
	f.Add([]byte("r"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		if p, err := s.Open("events/s/p1", b); err == nil && !bytes.Equal(s.Sign("events/s/p1", p), b) {
			t.Fatalf("verified a record the signer did not make: %q", b)
		}
		if _, err := s.OpenMessage("live/s/p1", now, time.Minute, b); err == nil && len(b) < MessageOverhead {
			t.Fatalf("verified a short message: %q", b)
		}
	})
}
