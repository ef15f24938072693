package seal

import (
	"bytes"
	"encoding/binary"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcphandler/mcphandler/internal/costguard"
)

var (
	secretA = bytes.Repeat([]byte{0xA1}, 32)
	secretB = []byte("0123456789abcdef0123456789abcdef-second-key")
	secretC = bytes.Repeat([]byte{0x5C}, 64)
	t0      = time.Date(2026, 8, 1, 12, 0, 0, 0, time.UTC)
)

func mustKeys(t testing.TB, secrets ...[]byte) *Keys {
	t.Helper()
	k, err := NewKeys(secrets...)
	if err != nil {
		t.Fatalf("NewKeys: %v", err)
	}
	return k
}

func binding(t testing.TB) Binding {
	return Binding{
		Subject:    "user-42",
		Tenant:     "acme",
		Method:     "tools/call",
		Name:       "delete_project",
		ArgsDigest: mustDigest(t, `{"project":"alpha","force":true,"n":1}`),
	}
}

func mustSeal(t testing.TB, k *Keys, b Binding, payload []byte, exp time.Time) string {
	t.Helper()
	tok, err := k.Seal(b, payload, exp)
	if err != nil {
		t.Fatalf("Seal: %v", err)
	}
	return tok
}

func TestRoundTrip(t *testing.T) {
	k := mustKeys(t, secretA)
	b := binding(t)
	for _, payload := range [][]byte{nil, {}, []byte("x"), []byte(`{"step":3,"flow":"9d1c"}`), bytes.Repeat([]byte{0, 0xff}, 5000)} {
		tok := mustSeal(t, k, b, payload, t0.Add(10*time.Minute))
		if !strings.HasPrefix(tok, Prefix) {
			t.Fatalf("token %q lacks prefix", tok)
		}
		if strings.ContainsAny(tok[len(Prefix):], "=+/.\r\n") {
			t.Fatalf("token %q is not unpadded base64url", tok)
		}
		got, err := k.Open(tok, b, t0)
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		if !bytes.Equal(got, payload) {
			t.Fatalf("payload = %q, want %q", got, payload)
		}
	}
}

func TestNonceIsFresh(t *testing.T) {
	k := mustKeys(t, secretA)
	b := binding(t)
	seen := map[string]bool{}
	for range 100 {
		tok := mustSeal(t, k, b, []byte("same"), t0.Add(time.Minute))
		if seen[tok] {
			t.Fatal("two seals of the same input gave the same token")
		}
		seen[tok] = true
	}
}

// TestOpaque checks that neither payload nor binding is readable in the
// token.
func TestOpaque(t *testing.T) {
	k := mustKeys(t, secretA)
	b := binding(t)
	payload := []byte("SECRET-PAYLOAD-SECRET-PAYLOAD")
	tok := mustSeal(t, k, b, payload, t0.Add(time.Minute))
	raw, err := b64.DecodeString(tok[len(Prefix):])
	if err != nil {
		t.Fatal(err)
	}
	for _, needle := range [][]byte{payload[:8], []byte(b.Subject), []byte(b.Tenant), []byte(b.Method), []byte(b.Name), b.ArgsDigest[:8]} {
		if bytes.Contains(raw, needle) || strings.Contains(tok, string(needle)) {
			t.Fatalf("token reveals %q", needle)
		}
	}
	if want := kidLen + nonceLen + expLen + len(payload) + tagLen; len(raw) != want {
		t.Fatalf("decoded token is %d bytes, want %d", len(raw), want)
	}
}

func TestTamperEveryByte(t *testing.T) {
	k := mustKeys(t, secretA)
	b := binding(t)
	tok := mustSeal(t, k, b, []byte(`{"step":1}`), t0.Add(time.Minute))
	raw, err := b64.DecodeString(tok[len(Prefix):])
	if err != nil {
		t.Fatal(err)
	}
	// Every bit of every decoded byte: kid bytes give ErrUnknownKey, all
	// others ErrTampered.
	for i := range raw {
		for bit := range 8 {
			mod := bytes.Clone(raw)
			mod[i] ^= 1 << bit
			_, err := k.Open(Prefix+b64.EncodeToString(mod), b, t0)
			want := ErrTampered
			if i < kidLen {
				want = ErrUnknownKey
			}
			if !errors.Is(err, want) {
				t.Fatalf("byte %d bit %d: err = %v, want %v", i, bit, err, want)
			}
		}
	}
	// Every character of the token string replaced by every other printable
	// ASCII character: never opens.
	for i := range len(tok) {
		for c := byte(0x20); c < 0x7f; c++ {
			if c == tok[i] {
				continue
			}
			mod := []byte(tok)
			mod[i] = c
			p, err := k.Open(string(mod), b, t0)
			if err == nil {
				t.Fatalf("char %d -> %q: opened (%q)", i, c, p)
			}
			if !isSentinel(err) {
				t.Fatalf("char %d -> %q: unexpected error %v", i, c, err)
			}
		}
	}
	// Truncated and extended tokens.
	for n := range len(tok) {
		if _, err := k.Open(tok[:n], b, t0); err == nil {
			t.Fatalf("prefix of length %d opened", n)
		}
	}
	for _, ext := range []string{"A", "AA", "AAAA", "\n", "="} {
		if _, err := k.Open(tok+ext, b, t0); err == nil {
			t.Fatalf("token+%q opened", ext)
		}
	}
}

func isSentinel(err error) bool {
	return errors.Is(err, ErrMalformed) || errors.Is(err, ErrUnknownKey) ||
		errors.Is(err, ErrTampered) || errors.Is(err, ErrExpired)
}

func TestExpiry(t *testing.T) {
	k := mustKeys(t, secretA)
	b := binding(t)
	exp := t0.Add(10 * time.Minute)
	tok := mustSeal(t, k, b, []byte("p"), exp)
	for _, tc := range []struct {
		now  time.Time
		want error
	}{
		{t0, nil},
		{exp.Add(-time.Millisecond), nil},
		{exp, ErrExpired},
		{exp.Add(time.Nanosecond), ErrExpired},
		{exp.Add(24 * time.Hour), ErrExpired},
		{time.Time{}, nil},
	} {
		_, err := k.Open(tok, b, tc.now)
		if !errors.Is(err, tc.want) {
			t.Errorf("now %v: err = %v, want %v", tc.now, err, tc.want)
		}
	}
	// An already-expired seal never opens.
	past := mustSeal(t, k, b, []byte("p"), t0.Add(-time.Second))
	if _, err := k.Open(past, b, t0); !errors.Is(err, ErrExpired) {
		t.Errorf("past expiry: err = %v", err)
	}
	// The expiry is authenticated before it is checked: a tampered expired
	// token reports tampering, not expiry.
	raw, err := b64.DecodeString(past[len(Prefix):])
	if err != nil {
		t.Fatal(err)
	}
	raw[kidLen+nonceLen] ^= 0x80 // first byte of the encrypted expiry
	if _, err := k.Open(Prefix+b64.EncodeToString(raw), b, t0); !errors.Is(err, ErrTampered) {
		t.Errorf("tampered expired token: err = %v, want ErrTampered", err)
	}
}

func TestBindingMismatch(t *testing.T) {
	k := mustKeys(t, secretA)
	b := binding(t)
	tok := mustSeal(t, k, b, []byte("p"), t0.Add(time.Minute))
	mod := func(f func(*Binding)) Binding { c := b; f(&c); return c }
	cases := []struct {
		name string
		b    Binding
	}{
		{"subject", mod(func(c *Binding) { c.Subject = "user-43" })},
		{"empty subject", mod(func(c *Binding) { c.Subject = "" })},
		{"tenant", mod(func(c *Binding) { c.Tenant = "globex" })},
		{"method", mod(func(c *Binding) { c.Method = "prompts/get" })},
		{"method case", mod(func(c *Binding) { c.Method = "TOOLS/CALL" })},
		{"name", mod(func(c *Binding) { c.Name = "delete_projects" })},
		{"args value", mod(func(c *Binding) { c.ArgsDigest = mustDigest(t, `{"project":"beta","force":true,"n":1}`) })},
		{"args number", mod(func(c *Binding) { c.ArgsDigest = mustDigest(t, `{"project":"alpha","force":true,"n":2}`) })},
		{"args extra", mod(func(c *Binding) { c.ArgsDigest = mustDigest(t, `{"project":"alpha","force":true,"n":1,"x":null}`) })},
		{"args zero", mod(func(c *Binding) { c.ArgsDigest = [32]byte{} })},
		// Length prefixes keep field boundaries apart.
		{"shifted boundary", mod(func(c *Binding) { c.Subject = "user-42a"; c.Tenant = "cme" })},
		{"swapped fields", mod(func(c *Binding) { c.Subject, c.Tenant = c.Tenant, c.Subject })},
	}
	for _, tc := range cases {
		if _, err := k.Open(tok, tc.b, t0); !errors.Is(err, ErrTampered) {
			t.Errorf("%s: err = %v, want ErrTampered", tc.name, err)
		}
	}
	// The same arguments written differently still open.
	same := mod(func(c *Binding) {
		c.ArgsDigest = mustDigest(t, " {\n \"n\" : 1.0e0, \"force\":true , \"proj\\u0065ct\":\"\\u0061lpha\"} ")
	})
	if _, err := k.Open(tok, same, t0); err != nil {
		t.Errorf("reformatted args: %v", err)
	}
}

func TestUnknownKey(t *testing.T) {
	b := binding(t)
	tok := mustSeal(t, mustKeys(t, secretA), b, []byte("p"), t0.Add(time.Minute))
	if _, err := mustKeys(t, secretB, secretC).Open(tok, b, t0); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("err = %v, want ErrUnknownKey", err)
	}
	var nilKeys *Keys
	if _, err := nilKeys.Open(tok, b, t0); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("nil Keys: err = %v, want ErrUnknownKey", err)
	}
}

func TestRotation(t *testing.T) {
	b := binding(t)
	old := mustKeys(t, secretA)
	tok := mustSeal(t, old, b, []byte("old"), t0.Add(time.Minute))

	rotated := mustKeys(t, secretB, secretA)
	if p, err := rotated.Open(tok, b, t0); err != nil || string(p) != "old" {
		t.Fatalf("[new, old] open: %q, %v", p, err)
	}
	// New tokens are sealed with the new key: the old set cannot open them.
	fresh := mustSeal(t, rotated, b, []byte("new"), t0.Add(time.Minute))
	if _, err := old.Open(fresh, b, t0); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("old set opened a new-key token: %v", err)
	}
	if p, err := mustKeys(t, secretB).Open(fresh, b, t0); err != nil || string(p) != "new" {
		t.Fatalf("[new] open of new token: %q, %v", p, err)
	}
	// Once the old key is dropped, its tokens stop opening.
	if _, err := mustKeys(t, secretB).Open(tok, b, t0); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("[new] opened an old-key token: %v", err)
	}
}

// TestKeyIDCollision forces two keys to share a key id: Open must try both.
func TestKeyIDCollision(t *testing.T) {
	b := binding(t)
	k := mustKeys(t, secretB, secretA)
	k.keys[0].kid = k.keys[1].kid
	tok := mustSeal(t, mustKeys(t, secretA), b, []byte("a"), t0.Add(time.Minute))
	if p, err := k.Open(tok, b, t0); err != nil || string(p) != "a" {
		t.Fatalf("open after colliding key: %q, %v", p, err)
	}
}

func TestMalformed(t *testing.T) {
	k := mustKeys(t, secretA)
	b := binding(t)
	good := mustSeal(t, k, b, nil, t0.Add(time.Minute))
	body := good[len(Prefix):]
	cases := map[string]string{
		"empty":             "",
		"no dot":            "v1",
		"prefix only":       "v1.",
		"other version":     "v2." + body,
		"upper version":     "V1." + body,
		"leading space":     " " + good,
		"trailing space":    good + " ",
		"padding":           good + "==",
		"std alphabet":      "v1." + strings.Repeat("+/", 40),
		"embedded newline":  good[:20] + "\n" + good[20:],
		"embedded CR":       good[:20] + "\r" + good[20:],
		"dot inside":        good[:20] + "." + good[21:],
		"too short":         "v1." + b64.EncodeToString(make([]byte, minRaw-1)),
		"bad length":        "v1.A",
		"non-canonical end": "v1." + body[:len(body)-1] + nonCanonicalLast(body),
		"non-ASCII":         good + "é",
		"NUL":               good[:10] + "\x00" + good[11:],
	}
	for name, tok := range cases {
		if _, err := k.Open(tok, b, t0); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: err = %v, want ErrMalformed", name, err)
		}
	}
	// Exactly the minimum length with a foreign key id is well-formed.
	if _, err := k.Open("v1."+b64.EncodeToString(make([]byte, minRaw)), b, t0); !errors.Is(err, ErrUnknownKey) {
		t.Errorf("minimum length: err = %v, want ErrUnknownKey", err)
	}
}

// nonCanonicalLast returns a replacement for the last character of an
// unpadded base64url string that sets bits the decoder must ignore, or the
// character itself when the length leaves no spare bits.
func nonCanonicalLast(body string) string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	last := strings.IndexByte(alphabet, body[len(body)-1])
	switch len(body) % 4 {
	case 2: // 4 spare bits
		return string(alphabet[last|0x0f])
	case 3: // 2 spare bits
		return string(alphabet[last|0x03])
	}
	return "!" // no spare bits: use an invalid character instead
}

func TestNewKeysErrors(t *testing.T) {
	if _, err := NewKeys(); err == nil {
		t.Error("no keys accepted")
	}
	if _, err := NewKeys(make([]byte, MinSecretLen-1)); err == nil {
		t.Error("short key accepted")
	}
	if _, err := NewKeys(secretA, nil); err == nil {
		t.Error("nil second key accepted")
	}
	if _, err := NewKeys(secretA, secretA); err != nil {
		t.Errorf("repeated key: %v", err)
	}
}

func TestSealErrors(t *testing.T) {
	b := binding(t)
	var nilKeys *Keys
	if _, err := nilKeys.Seal(b, nil, t0); err == nil {
		t.Error("nil Keys sealed")
	}
	if _, err := (&Keys{}).Seal(b, nil, t0); err == nil {
		t.Error("empty Keys sealed")
	}
	if _, err := mustKeys(t, secretA).Seal(b, nil, time.Time{}); err == nil {
		t.Error("zero expiry sealed")
	}
}

func TestErrorsPrefixed(t *testing.T) {
	for _, err := range []error{ErrMalformed, ErrUnknownKey, ErrTampered, ErrExpired, ErrInvalidJSON} {
		if !strings.HasPrefix(err.Error(), "seal: ") {
			t.Errorf("%q lacks the seal: prefix", err)
		}
	}
}

func TestConcurrent(t *testing.T) {
	k := mustKeys(t, secretA, secretB)
	b := binding(t)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				p := []byte{byte(g), byte(i)}
				tok, err := k.Seal(b, p, t0.Add(time.Minute))
				if err != nil {
					t.Error(err)
					return
				}
				got, err := k.Open(tok, b, t0)
				if err != nil || !bytes.Equal(got, p) {
					t.Errorf("got %v, %v", got, err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// sealFixed seals like Seal but with a fixed nonce, so that fuzz seeds are
// the same in every fuzz worker process.
func sealFixed(k *Keys, b Binding, payload []byte, exp time.Time, nonceByte byte) string {
	s := &k.keys[0]
	nonce := bytes.Repeat([]byte{nonceByte}, nonceLen)
	pt := make([]byte, expLen+len(payload))
	binary.BigEndian.PutUint64(pt, uint64(exp.UnixMilli()))
	copy(pt[expLen:], payload)
	raw := append(append(s.kid[:len(s.kid):len(s.kid)], nonce...), s.aead.Seal(nil, nonce, pt, appendAAD(nil, &s.kid, &b))...)
	return Prefix + b64.EncodeToString(raw)
}

func FuzzOpen(f *testing.F) {
	k := mustKeys(f, secretA, secretB)
	b := binding(f)
	valid := map[string]bool{}
	for i, p := range [][]byte{[]byte(`{"step":2}`), nil, bytes.Repeat([]byte("ab"), 40)} {
		tok := sealFixed(k, b, p, t0.Add(time.Minute), byte(i))
		if _, err := k.Open(tok, b, t0); err != nil {
			f.Fatalf("fixed seal does not open: %v", err)
		}
		valid[tok] = true
		f.Add(tok)
	}
	good := sealFixed(k, b, []byte("x"), t0.Add(time.Minute), 9)
	valid[good] = true
	f.Add(good)
	f.Add(sealFixed(k, b, []byte("x"), t0.Add(-time.Minute), 10))                   // expired
	f.Add(sealFixed(mustKeys(f, secretC), b, []byte("x"), t0.Add(time.Minute), 11)) // unknown key
	f.Add("")
	f.Add("v1.")
	f.Add("v1")
	f.Add("v2." + good[3:])
	f.Add(good + "=")
	f.Add(good[:len(good)-1])
	f.Add("v1." + b64.EncodeToString(make([]byte, minRaw)))
	f.Add("v1.\n\r")
	f.Add("v1.eyJtIjoidG9vbHMvY2FsbCIsIm4iOiJkZWxldGVfcHJvamVjdCIsImV4cCI6MTc4NjAwMDAwMH0.q7Zk")
	f.Add("v1." + b64.EncodeToString(make([]byte, 64<<10))) // long: decoded and authenticated in linear time
	f.Fuzz(func(t *testing.T, tok string) {
		var p []byte
		var err error
		costguard.Check(t, len(tok), func() { p, err = k.Open(tok, b, t0) })
		if err == nil {
			// Only a token sealed above may open: the fuzzer cannot forge
			// one, and each byte string has a single accepted encoding.
			if !valid[tok] {
				t.Fatalf("opened unsealed token %q (payload %q)", tok, p)
			}
			return
		}
		if p != nil {
			t.Fatalf("payload %q returned with error %v", p, err)
		}
		if !isSentinel(err) {
			t.Fatalf("Open(%q) = %v: not a sentinel error", tok, err)
		}
	})
}

func BenchmarkSealOpen(b *testing.B) {
	k := mustKeys(b, secretA, secretB)
	bind := binding(b)
	payload := []byte(`{"step":2,"flow":"9d1c","answers":{"confirm":true}}`)
	exp := t0.Add(10 * time.Minute)
	b.ReportAllocs()
	for b.Loop() {
		tok, err := k.Seal(bind, payload, exp)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := k.Open(tok, bind, t0); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkOpen(b *testing.B) {
	k := mustKeys(b, secretA)
	bind := binding(b)
	tok := mustSeal(b, k, bind, []byte(`{"step":2,"flow":"9d1c"}`), t0.Add(10*time.Minute))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := k.Open(tok, bind, t0); err != nil {
			b.Fatal(err)
		}
	}
}
