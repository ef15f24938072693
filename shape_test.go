package mcphandler_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"sort"
	"strings"
	"testing"
)

// Bounds of the root package's shape: a reader finds where they are when
// Handler keeps the composition and the public methods, each component
// its own part, and no function needs more than a screen.
const (
	maxHandlerMethods  = 40
	maxReceiverMethods = 60
	maxConfigFields    = 30
	maxFuncLines       = 60
	maxFuncsOver40     = 5
)

// TestPackageShape holds the root package (non-test files) to the bounds
// above, and names what exceeds one.
func TestPackageShape(t *testing.T) {
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, ".", func(fi os.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, 0)
	if err != nil {
		t.Fatal(err)
	}
	methods := map[string]int{}
	var over40 []string
	for _, f := range pkgs["mcphandler"].Files {
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				name := d.Name.Name
				if d.Recv != nil {
					r := receiverName(d.Recv.List[0].Type)
					methods[r]++
					name = r + "." + name
				}
				lines := fset.Position(d.End()).Line - fset.Position(d.Pos()).Line + 1
				if lines > maxFuncLines {
					t.Errorf("%s is %d lines, at most %d", name, lines, maxFuncLines)
				}
				if lines > 40 {
					over40 = append(over40, name)
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					if ts, ok := s.(*ast.TypeSpec); ok && ts.Name.Name == "Config" {
						n := 0
						for _, fl := range ts.Type.(*ast.StructType).Fields.List {
							n += max(1, len(fl.Names))
						}
						if n > maxConfigFields {
							t.Errorf("Config has %d top-level fields, at most %d: group the new one with those it belongs with", n, maxConfigFields)
						}
					}
				}
			}
		}
	}
	if len(over40) > maxFuncsOver40 {
		sort.Strings(over40)
		t.Errorf("%d functions over 40 lines, at most %d: %v", len(over40), maxFuncsOver40, over40)
	}
	if n := methods["Handler"]; n > maxHandlerMethods {
		t.Errorf("*Handler has %d methods, at most %d: give the new ones to the component they belong to", n, maxHandlerMethods)
	}
	for r, n := range methods {
		if n > maxReceiverMethods {
			t.Errorf("%s has %d methods, at most %d", r, n, maxReceiverMethods)
		}
	}
	if len(methods) < 10 || methods["Handler"] == 0 {
		t.Fatalf("the parse found %d receivers: not the package", len(methods))
	}
}

func receiverName(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.StarExpr:
		return receiverName(e.X)
	case *ast.IndexExpr:
		return receiverName(e.X)
	case *ast.IndexListExpr:
		return receiverName(e.X)
	case *ast.Ident:
		return e.Name
	}
	return "?"
}
