package main

import (
	"bytes"
	"context"
	"errors"
	"go/ast"
	"go/parser"
	"go/printer"
	"go/token"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"

	"github.com/mcphandler/mcphandler/mcptest"
)

// readmeSample returns the first Go block of the README's "Mounting it"
// section.
func readmeSample(t *testing.T) []byte {
	t.Helper()
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := bytes.Cut(readme, []byte("\n## Mounting it\n"))
	if !ok {
		t.Fatal(`the README has no "## Mounting it" section`)
	}
	_, block, ok := bytes.Cut(section, []byte("\n```go\n"))
	if !ok {
		t.Fatal(`"Mounting it" has no Go block`)
	}
	block, _, ok = bytes.Cut(block, []byte("\n```\n"))
	if !ok {
		t.Fatal(`"Mounting it"'s Go block does not end`)
	}
	return append(block, '\n')
}

// The README's first sample is this program, byte for byte: what a new
// user copies is what CI builds and the tests below run.
func TestReadmeIsHello(t *testing.T) {
	main, err := os.ReadFile("main.go")
	if err != nil {
		t.Fatal(err)
	}
	if sample := readmeSample(t); !bytes.Equal(sample, main) {
		t.Fatalf("the README's \"Mounting it\" sample differs from examples/hello/main.go:\n--- README\n%s\n--- main.go\n%s", sample, main)
	}
}

// pieces returns the source of the declarations of greetIn, greet and
// keys in the Go file at path, and of its mcphandler.Config literal.
func pieces(t *testing.T, path string) map[string]string {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	src := func(n ast.Node) string {
		var b bytes.Buffer
		printer.Fprint(&b, fset, &printer.CommentedNode{Node: n, Comments: f.Comments})
		return b.String()
	}
	out := map[string]string{}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.GenDecl:
			for _, s := range n.Specs {
				switch s := s.(type) {
				case *ast.TypeSpec:
					if s.Name.Name == "greetIn" {
						out["greetIn"] = src(n)
					}
				case *ast.ValueSpec:
					if s.Names[0].Name == "greet" || s.Names[0].Name == "keys" {
						out[s.Names[0].Name] = src(n)
					}
				}
			}
		case *ast.CompositeLit:
			if sel, ok := n.Type.(*ast.SelectorExpr); ok && sel.Sel.Name == "Config" {
				out["Config"] = src(n)
			}
		}
		return true
	})
	return out
}

// The package's Example is the same program: the same tool, keys and
// Config, so that godoc and the README show one thing.
func TestExampleIsHello(t *testing.T) {
	hello, example := pieces(t, "main.go"), pieces(t, "../../example_test.go")
	for _, k := range []string{"greetIn", "greet", "keys", "Config"} {
		if hello[k] == "" {
			t.Fatalf("main.go has no %s", k)
		}
		if hello[k] != example[k] {
			t.Errorf("%s differs:\n--- main.go\n%s\n--- example_test.go\n%s", k, hello[k], example[k])
		}
	}
}

// The program, over HTTP with a real MCP client on both protocol eras:
// greet answers without asking the human (it is marked read-only), an
// unknown key is refused, and greet is the only tool.
func TestHelloGreetsWithoutConfirm(t *testing.T) {
	mux := http.NewServeMux()
	mux.Handle("/mcp", newHandler())
	srv := httptest.NewServer(mux)
	defer srv.Close()
	asked := func(_ context.Context, p mcptest.ElicitParams) (mcptest.ElicitResult, error) {
		t.Errorf("greet asked for a confirm: %q", p.Message)
		return mcptest.ElicitResult{Action: mcptest.ActionDecline}, nil
	}
	ctx := context.Background()
	for _, c := range []*mcptest.Client{
		mcptest.Dial(srv.URL+"/mcp", mcptest.WithToken("k1"), mcptest.WithElicitationHandler(asked)),
		mcptest.DialModern(srv.URL+"/mcp", mcptest.WithToken("k1"), mcptest.WithElicitationHandler(asked)),
	} {
		defer c.Close()
		if c.Era() != mcptest.Stateless {
			if _, err := c.Initialize(ctx); err != nil {
				t.Fatalf("%v: initialize: %v", c.Era(), err)
			}
		}
		tools, err := c.ListTools(ctx)
		if err != nil || len(tools) != 1 || tools[0].Name != "greet" {
			t.Fatalf("%v: tools/list: %+v %v", c.Era(), tools, err)
		}
		res, err := c.CallTool(ctx, "greet", map[string]any{"name": "Ada"})
		if err != nil {
			t.Fatalf("%v: greet: %v", c.Era(), err)
		}
		if res.IsError || res.Text() != "Hello Ada from acme" {
			t.Fatalf("%v: greet: %q", c.Era(), res.Text())
		}
		if res, err := c.CallTool(ctx, "greet", map[string]any{"name": 7}); err != nil || !res.IsError {
			t.Fatalf("%v: greet with a number for a name: %v %v", c.Era(), res, err)
		}
	}
	bad := mcptest.Dial(srv.URL+"/mcp", mcptest.WithToken("k2"))
	defer bad.Close()
	var he *mcptest.HTTPError
	if _, err := bad.Initialize(ctx); !errors.As(err, &he) || he.Status != http.StatusUnauthorized {
		t.Fatalf("an unknown key: %v, want 401", err)
	}
}
