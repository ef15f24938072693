package session

import (
	"go/ast"
	"go/parser"
	"go/token"
	"strings"
	"testing"
)

func TestCapabilitiesString(t *testing.T) {
	for _, tc := range []struct {
		c    Capabilities
		want string
	}{
		{0, "0"},
		{CapElicitationForm, "elicitation.form"},
		{CapElicitationForm | CapSampling, "elicitation.form|sampling"},
		{CapRoots | CapRootsListChanged, "roots|roots.listChanged"},
		{CapSamplingTools | 1<<9, "sampling.tools|0x200"},
		{1 << 15, "0x8000"},
	} {
		if got := tc.c.String(); got != tc.want {
			t.Errorf("%d.String() = %q, want %q", uint16(tc.c), got, tc.want)
		}
	}
}

// TestEveryCapabilityNamed: every Cap constant of session.go has a name of
// its own, so that a store keeping capabilities by name (the Redis store
// does, and checks it keeps every named one) cannot silently drop a new
// capability.
func TestEveryCapabilityNamed(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "session.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var consts []string
	ast.Inspect(f, func(n ast.Node) bool {
		if vs, ok := n.(*ast.ValueSpec); ok {
			for _, id := range vs.Names {
				if strings.HasPrefix(id.Name, "Cap") {
					consts = append(consts, id.Name)
				}
			}
		}
		return true
	})
	if len(consts) != len(capNames) {
		t.Fatalf("session.go declares %d capabilities %v but names %d", len(consts), consts, len(capNames))
	}
	seen := map[string]bool{}
	for i := range capNames {
		name := Capabilities(1 << i).String()
		if strings.Contains(name, "0x") || strings.Contains(name, "|") || seen[name] {
			t.Fatalf("bit %d is named %q", i, name)
		}
		seen[name] = true
	}
	for _, c := range []Capabilities{CapElicitationForm, CapElicitationURL, CapSampling, CapSamplingTools, CapRoots, CapRootsListChanged, CapUIApps} {
		if c == 0 || c&(c-1) != 0 || c >= 1<<len(capNames) {
			t.Fatalf("capability %v is not one named bit", c)
		}
	}
}
