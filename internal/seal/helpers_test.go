package seal

import "testing"

func mustDigest(t testing.TB, args string) [32]byte {
	t.Helper()
	d, err := Digest([]byte(args))
	if err != nil {
		t.Fatalf("Digest(%s): %v", args, err)
	}
	return d
}
