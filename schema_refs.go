package mcphandler

import (
	"errors"
	"net/url"
	"strconv"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
)

// The JSON Schema validator follows every $ref without a guard on depth:
// an input schema whose references loop back without descending into the
// arguments ({"$ref":"#"}) exhausts its stack, which no recover catches,
// and the process dies on the first call; one whose references fan out
// ($defs that each use the previous one twice) costs time exponential in
// its own size on every call. checkRefs refuses both before a schema is
// served: a schema whose references loop at all, or in which one
// subschema is reached from the root along more than maxSchemaPaths
// paths. So validating arguments costs at most maxSchemaPaths times what
// the same schema written out without references would cost.
//
// It reads the references the way the validator resolves them only for
// the forms schemas usually use: "#" (the root), "#/$defs/<name>" and
// "#/definitions/<name>". A schema with any other reference, a
// $dynamicRef, or an $id below its root (which changes what "#" means)
// is refused too, with a reason saying so.

// maxSchemaPaths bounds the paths from an input schema's root to any of
// its subschemas.
const maxSchemaPaths = 1024

// checkRefs reports why the compiled schema root cannot be validated
// safely; nil when it can.
func checkRefs(root *jsonschema.Schema) error {
	var all []*jsonschema.Schema
	refs := false
	visit(root, func(s *jsonschema.Schema) {
		all = append(all, s)
		refs = refs || s.Ref != "" || s.DynamicRef != ""
	}, true)
	if !refs {
		return nil // a tree: every subschema is reached once
	}
	for _, s := range all {
		switch {
		case s.DynamicRef != "":
			return errors.New("$dynamicRef is not supported")
		case s != root && s.ID != "":
			return errors.New("an $id below the root, with references, is not supported")
		}
	}
	g := refGraph{root: root, state: map[*jsonschema.Schema]uint8{}, paths: map[*jsonschema.Schema]int{}}
	if err := g.order(root); err != nil {
		return err
	}
	// Paths from the root, in topological order (order appended children
	// before their parents).
	g.paths[root] = 1
	for i := len(g.topo) - 1; i >= 0; i-- {
		s := g.topo[i]
		n := g.paths[s]
		if n > maxSchemaPaths {
			return errors.New("a subschema is reached along more than " + strconv.Itoa(maxSchemaPaths) + " paths of references")
		}
		for _, c := range g.edges(s) {
			g.paths[c] = min(g.paths[c]+n, maxSchemaPaths+1)
		}
	}
	return nil
}

// refGraph is the graph of what validation evaluates: each subschema's
// applicators and its $ref.
type refGraph struct {
	root  *jsonschema.Schema
	state map[*jsonschema.Schema]uint8 // 1: on the current path, 2: done
	topo  []*jsonschema.Schema         // post-order
	paths map[*jsonschema.Schema]int
}

// edges returns the subschemas s evaluates: its applicators and, for a
// $ref, its target (resolved in order, which already checked the form).
func (g *refGraph) edges(s *jsonschema.Schema) []*jsonschema.Schema {
	var out []*jsonschema.Schema
	visit(s, func(c *jsonschema.Schema) {
		if c != s {
			out = append(out, c)
		}
	}, false)
	if s.Ref != "" {
		if t, _ := g.target(s.Ref); t != nil {
			out = append(out, t)
		}
	}
	return out
}

// order appends to g.topo the subschemas s evaluates, after them s, and
// fails on a loop or a reference it cannot resolve.
func (g *refGraph) order(s *jsonschema.Schema) error {
	switch g.state[s] {
	case 1:
		return errors.New("its references loop (a recursive schema)")
	case 2:
		return nil
	}
	if s.Ref != "" {
		if _, err := g.target(s.Ref); err != nil {
			return err
		}
	}
	g.state[s] = 1
	for _, c := range g.edges(s) {
		if err := g.order(c); err != nil {
			return err
		}
	}
	g.state[s] = 2
	g.topo = append(g.topo, s)
	return nil
}

// target resolves ref as the validator does, for the forms checkRefs
// reads.
func (g *refGraph) target(ref string) (*jsonschema.Schema, error) {
	u, err := url.Parse(ref)
	if err != nil || u.Scheme != "" || u.Host != "" || u.Path != "" || u.RawQuery != "" || u.Opaque != "" {
		return nil, errors.New("$ref " + strconv.Quote(clip(ref, 64)) + " is not local (only \"#\", \"#/$defs/<name>\" and \"#/definitions/<name>\" are supported)")
	}
	f := u.Fragment
	if f == "" {
		return g.root, nil
	}
	var defs map[string]*jsonschema.Schema
	name, ok := strings.CutPrefix(f, "/$defs/")
	if ok {
		defs = g.root.Defs
	} else if name, ok = strings.CutPrefix(f, "/definitions/"); ok {
		defs = g.root.Definitions
	}
	if !ok || strings.Contains(name, "/") {
		return nil, errors.New("$ref " + strconv.Quote(clip(ref, 64)) + " is not supported (only \"#\", \"#/$defs/<name>\" and \"#/definitions/<name>\" are)")
	}
	name = strings.NewReplacer("~1", "/", "~0", "~").Replace(name)
	t := defs[name]
	if t == nil {
		return nil, errors.New("$ref " + strconv.Quote(clip(ref, 64)) + " names no definition")
	}
	return t, nil
}

// visit calls f on s and the subschemas it evaluates (applicators of
// every kind: in place, on items, on properties), down the whole tree
// when deep, else only s's own. With deep, definitions ($defs,
// definitions) are visited too, though nothing evaluates them but a
// $ref.
func visit(s *jsonschema.Schema, f func(*jsonschema.Schema), deep bool) {
	if s == nil {
		return
	}
	f(s)
	one := func(c *jsonschema.Schema) {
		if c == nil {
			return
		}
		if deep {
			visit(c, f, true)
		} else {
			f(c)
		}
	}
	for _, list := range [][]*jsonschema.Schema{s.PrefixItems, s.ItemsArray, s.AllOf, s.AnyOf, s.OneOf} {
		for _, c := range list {
			one(c)
		}
	}
	for _, c := range []*jsonschema.Schema{s.Items, s.AdditionalItems, s.Contains, s.UnevaluatedItems,
		s.AdditionalProperties, s.PropertyNames, s.UnevaluatedProperties, s.Not, s.If, s.Then, s.Else} {
		one(c)
	}
	maps := []map[string]*jsonschema.Schema{s.Properties, s.PatternProperties, s.DependentSchemas, s.DependencySchemas}
	if deep {
		maps = append(maps, s.Defs, s.Definitions)
	}
	for _, m := range maps {
		for _, c := range m {
			one(c)
		}
	}
}
