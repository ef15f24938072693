package redisstore

import (
	"go/ast"
	"go/doc"
	"go/doc/comment"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestPackageDoc: go doc shows the whole overview of the package — its
// summary and every section — as one comment: a blank line (not "//")
// inside it would leave go doc only the part after it.
func TestPackageDoc(t *testing.T) {
	fset := token.NewFileSet()
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var files []*ast.File
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(fset, name, src, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	p, err := doc.NewFromFiles(fset, files, "github.com/mcphandler/mcphandler/session/redisstore")
	if err != nil {
		t.Fatal(err)
	}
	if syn := p.Synopsis(p.Doc); !strings.HasPrefix(syn, "Package redisstore is a session.Store kept in Redis") {
		t.Errorf("synopsis %q", syn)
	}
	var headings []string
	for _, b := range p.Parser().Parse(p.Doc).Content {
		if h, ok := b.(*comment.Heading); ok {
			var text strings.Builder
			for _, x := range h.Text {
				if p, ok := x.(comment.Plain); ok {
					text.WriteString(string(p))
				}
			}
			headings = append(headings, text.String())
		}
	}
	want := []string{"What is stored where", "Cost per call", "Consistency", "Pub/Sub, connections and goroutines",
		"Topologies", "Failures", "Foreign values", "Client settings"}
	if !slices.Equal(headings, want) {
		t.Errorf("sections %q, want %q", headings, want)
	}
}
