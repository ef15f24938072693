package mcphandler_test

import (
	"bufio"
	"bytes"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestModulesImportPublicAPIOnly: no module of the repository but this one
// (otelmcp, the examples that are modules of their own, any other go.mod
// of the tree or of go.work) imports a package of this module's internal
// tree, in any of its Go files, tests included. An internal package
// carries no promise beyond its own module's version, so a module that
// imports it stops compiling once the two are versioned apart.
func TestModulesImportPublicAPIOnly(t *testing.T) {
	core := modulePath(t, "go.mod")
	internal := core + "/internal"
	dirs := map[string]bool{}
	for _, d := range workUses(t, "go.work") {
		dirs[filepath.Clean(d)] = true
	}
	err := filepath.WalkDir(".", func(path string, e os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.IsDir() && path != "." && (e.Name() == "testdata" || strings.HasPrefix(e.Name(), ".")) {
			return filepath.SkipDir
		}
		if !e.IsDir() && e.Name() == "go.mod" {
			dirs[filepath.Dir(path)] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	delete(dirs, ".")
	var mods []string
	for d := range dirs {
		mods = append(mods, d)
	}
	slices.Sort(mods)
	for _, want := range []string{"otelmcp", filepath.Join("examples", "quickstart"), filepath.Join("examples", "otel")} {
		if !dirs[want] {
			t.Errorf("module %s not found (modules: %q): the test would not look at it", want, mods)
		}
	}
	for _, mod := range mods {
		// A module whose path is inside the internal tree (such as
		// internal/realop) imports its own packages: they are not the core's.
		own := modulePath(t, filepath.Join(mod, "go.mod"))
		files := 0
		err := filepath.WalkDir(mod, func(path string, e os.DirEntry, err error) error {
			if err != nil || e.IsDir() || !strings.HasSuffix(path, ".go") {
				return err
			}
			files++
			f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
			if err != nil {
				return err
			}
			for _, imp := range f.Imports {
				p, _ := strconv.Unquote(imp.Path.Value)
				if p == own || strings.HasPrefix(p, own+"/") {
					continue
				}
				if p == internal || strings.HasPrefix(p, internal+"/") {
					t.Errorf("%s imports %s: module %s uses the public API of %s only", path, p, mod, core)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if files == 0 {
			t.Errorf("module %s has no Go file", mod)
		}
	}
}

// modulePath returns the module path a go.mod declares.
func modulePath(t *testing.T, gomod string) string {
	t.Helper()
	src, err := os.ReadFile(gomod)
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(src)) {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "module "); ok {
			return strings.Trim(strings.TrimSpace(rest), `"`)
		}
	}
	t.Fatalf("%s declares no module", gomod)
	return ""
}

// workUses returns the directories a go.work uses, from its use lines and
// blocks.
func workUses(t *testing.T, gowork string) []string {
	t.Helper()
	src, err := os.ReadFile(gowork)
	if err != nil {
		t.Fatal(err)
	}
	var dirs []string
	block := false
	sc := bufio.NewScanner(bytes.NewReader(src))
	for sc.Scan() {
		line, _, _ := strings.Cut(sc.Text(), "//")
		f := strings.Fields(line)
		switch {
		case block && len(f) == 1 && f[0] == ")":
			block = false
		case block && len(f) == 1:
			dirs = append(dirs, strings.Trim(f[0], `"`))
		case len(f) == 2 && f[0] == "use" && f[1] == "(":
			block = true
		case len(f) == 2 && f[0] == "use":
			dirs = append(dirs, strings.Trim(f[1], `"`))
		}
	}
	if len(dirs) == 0 {
		t.Fatalf("%s uses no module", gowork)
	}
	return dirs
}
