package sign

import "testing"

var (
	secretA = []byte("0123456789abcdef0123456789abcdef")
	secretB = []byte("fedcba9876543210fedcba9876543210")
)

func mustSigner(t testing.TB, purpose string, secrets ...[]byte) *Signer {
	t.Helper()
	s, err := NewSigner(purpose, secrets...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
