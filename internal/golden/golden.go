// Package golden compares the bytes a release writes with the bytes a
// file under testdata/golden holds, for the tests that pin what replicas
// store and exchange (the golden tests of each package): replicas of two
// releases must keep understanding each other during a rolling upgrade.
//
// `go test -run TestGolden -update` rewrites the files: only for a change
// that says how mixed releases still interoperate.
package golden

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files of testdata/golden from this release's encoders")

// Updating reports whether the test run rewrites the golden files.
func Updating() bool { return *update }

// File compares got with testdata/golden/name and returns the file's
// bytes; with -update it writes got there instead and returns it. A
// missing file fails the test at once; other bytes than the file's fail
// it and say which.
func File(t testing.TB, name string, got []byte) []byte {
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
