// Package examples_test checks what the README promises of the examples:
// each small one is one concept in tens of lines, on the public API only,
// and comes with a test that runs it.
package examples_test

import (
	"bytes"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// large are the examples that show a whole service rather than one
// concept. The conformance server is driven by the official suites
// (scripts/conformance.sh) rather than a test of its own.
var large = map[string]bool{"quickstart": true, "saas": true, "conformance": true, "gateway": true}

// maxLines bounds the Go source of a small example, tests aside.
const maxLines = 120

// TestExamples: no example imports a package of the module's internal
// tree, in any of its files but tests; each small example is at most
// maxLines lines of Go and has a test.
func TestExamples(t *testing.T) {
	dirs, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	small := 0
	for _, d := range dirs {
		if !d.IsDir() {
			continue
		}
		name := d.Name()
		lines, tests := 0, 0
		err := filepath.WalkDir(name, func(path string, e os.DirEntry, err error) error {
			if err != nil || e.IsDir() || !strings.HasSuffix(path, ".go") {
				return err
			}
			if strings.HasSuffix(path, "_test.go") {
				tests++
				return nil
			}
			src, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			lines += bytes.Count(src, []byte("\n"))
			f, err := parser.ParseFile(token.NewFileSet(), path, src, parser.ImportsOnly)
			if err != nil {
				return err
			}
			for _, imp := range f.Imports {
				p, _ := strconv.Unquote(imp.Path.Value)
				if strings.HasPrefix(p, "github.com/mcphandler/mcphandler/internal/") {
					t.Errorf("%s imports %s: examples use the public API only", path, p)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if large[name] {
			continue
		}
		small++
		if lines > maxLines {
			t.Errorf("examples/%s is %d lines of Go: a small example shows one concept in at most %d", name, lines, maxLines)
		}
		if tests == 0 {
			t.Errorf("examples/%s has no test that runs it", name)
		}
	}
	if small < 5 {
		t.Errorf("%d small examples, want confirm, approvals, replicas, tasks, otel at least", small)
	}
}
