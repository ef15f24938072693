package mcpheaders

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/mcphandler/mcphandler/internal/decimal"
)

// annotation is the JSON Schema keyword that mirrors a tool argument into an
// Mcp-Param-* header.
const annotation = "x-mcp-header"

// ParamHeaders collects the x-mcp-header annotations of a tool's input
// schema. It returns a map from each annotation value X (as written; the
// header is ParamHeaderPrefix+X) to the path of the annotated property: the
// chain of "properties" keys from the root, so ["region"] is the top-level
// argument "region" and ["target", "region"] is arguments.target.region. It
// returns a nil map when the schema has no annotations.
//
// It returns an error, and the tool definition is invalid, when an
// annotation breaks a rule of the spec:
//
//   - the value is not a non-empty RFC 9110 token;
//   - two values are equal ignoring case;
//   - the annotated property's "type" is not "string", "integer" or
//     "boolean" (a list of one of those plus "null" is accepted);
//   - the annotation is not on a statically reachable property: it is on the
//     root schema, or under items, prefixItems, additionalProperties,
//     patternProperties, allOf/anyOf/oneOf/not, if/then/else, $defs,
//     definitions, dependentSchemas or a similar subschema keyword ($ref is
//     never followed).
//
// The schema itself must be a JSON object.
func ParamHeaders(inputSchema []byte) (map[string][]string, error) {
	var root any
	if err := json.Unmarshal(inputSchema, &root); err != nil {
		return nil, fmt.Errorf("modern: input schema: %w", err)
	}
	m, ok := root.(map[string]any)
	if !ok {
		return nil, errors.New("modern: input schema is not a JSON object")
	}
	w := walker{seen: map[string]string{}}
	if err := w.schema(m, true); err != nil {
		return nil, err
	}
	return w.out, nil
}

// walker visits a schema's subschemas. It keeps the path and location of
// the current one as stacks, so that a schema nested d deep costs O(d), not
// O(d²).
type walker struct {
	out  map[string][]string
	seen map[string]string // lower-cased annotation -> location
	path []string          // the "properties" names from the root
	loc  []string          // JSON Pointer tokens from the root, escaped
}

// where returns the location of the current schema, such as
// "#/properties/a".
func (w *walker) where() string {
	if len(w.loc) == 0 {
		return "#"
	}
	return "#/" + strings.Join(w.loc, "/")
}

// sub visits the subschema sub at the location tokens below the current
// one.
func (w *walker) sub(sub map[string]any, static bool, tokens ...string) error {
	n := len(w.loc)
	for _, t := range tokens {
		w.loc = append(w.loc, pointerEscape(t))
	}
	err := w.schema(sub, static)
	w.loc = w.loc[:n]
	return err
}

// Subschema keywords that are not "properties". An annotation found through
// any of them is not statically reachable.
var (
	oneSchema = []string{
		"additionalItems", "additionalProperties", "contains", "contentSchema",
		"else", "if", "items", "not", "propertyNames", "then",
		"unevaluatedItems", "unevaluatedProperties",
	}
	schemaList = []string{"allOf", "anyOf", "oneOf", "prefixItems", "items"}
	schemaMap  = []string{"$defs", "definitions", "dependencies", "dependentSchemas", "patternProperties"}
)

func (w *walker) schema(s map[string]any, static bool) error {
	if raw, ok := s[annotation]; ok {
		if err := w.annotate(s, raw, static); err != nil {
			return err
		}
	}
	if props, ok := s["properties"].(map[string]any); ok {
		for _, name := range sortedKeys(props) {
			if sub, ok := props[name].(map[string]any); ok {
				w.path = append(w.path, name)
				err := w.sub(sub, static, "properties", name)
				w.path = w.path[:len(w.path)-1]
				if err != nil {
					return err
				}
			}
		}
	}
	for _, kw := range oneSchema {
		if sub, ok := s[kw].(map[string]any); ok {
			if err := w.sub(sub, false, kw); err != nil {
				return err
			}
		}
	}
	for _, kw := range schemaList {
		if list, ok := s[kw].([]any); ok {
			for i, v := range list {
				if sub, ok := v.(map[string]any); ok {
					if err := w.sub(sub, false, kw, strconv.Itoa(i)); err != nil {
						return err
					}
				}
			}
		}
	}
	for _, kw := range schemaMap {
		if subs, ok := s[kw].(map[string]any); ok {
			for _, k := range sortedKeys(subs) {
				if sub, ok := subs[k].(map[string]any); ok {
					if err := w.sub(sub, false, kw, k); err != nil {
						return err
					}
				}
			}
		}
	}
	return nil
}

func (w *walker) annotate(s map[string]any, raw any, static bool) error {
	if !static || len(w.path) == 0 {
		return fmt.Errorf("modern: %s: %s is only allowed on a property reached from the root through properties", w.where(), annotation)
	}
	name, ok := raw.(string)
	if !ok || name == "" {
		return fmt.Errorf("modern: %s: %s must be a non-empty string", w.where(), annotation)
	}
	if !isToken(name) {
		return fmt.Errorf("modern: %s: %s %q is not an HTTP token", w.where(), annotation, name)
	}
	if !primitiveType(s["type"]) {
		return fmt.Errorf("modern: %s: %s %q is on a property whose type is not string, integer or boolean", w.where(), annotation, name)
	}
	lower := strings.ToLower(name)
	if prev, dup := w.seen[lower]; dup {
		return fmt.Errorf("modern: %s: %s %q repeats the one at %s (names are case-insensitive)", w.where(), annotation, name, prev)
	}
	w.seen[lower] = w.where()
	if w.out == nil {
		w.out = map[string][]string{}
	}
	w.out[name] = slices.Clone(w.path)
	return nil
}

// primitiveType reports whether a schema "type" is string, integer or
// boolean, alone or with "null".
func primitiveType(t any) bool {
	prim := func(s any) bool { return s == "string" || s == "integer" || s == "boolean" }
	switch t := t.(type) {
	case string:
		return prim(t)
	case []any:
		n := 0
		for _, e := range t {
			switch {
			case prim(e):
				n++
			case e == "null":
			default:
				return false
			}
		}
		return n == 1 && len(t) <= 2
	}
	return false
}

// isToken reports whether s is an RFC 9110 token (1*tchar).
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

var pointerEscaper = strings.NewReplacer("~", "~0", "/", "~1")

func pointerEscape(s string) string { return pointerEscaper.Replace(s) }

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// CheckParamHeaders checks the Mcp-Param-* headers of a tools/call request
// against its arguments. params is the result of ParamHeaders for the called
// tool and args the JSON of params.arguments. For each annotation X, in
// sorted order:
//
//   - the header Mcp-Param-X may appear at most once, and its value must
//     hold only visible ASCII and spaces (other characters must be sent
//     Base64-encoded) and, if it is a sentinel, decode;
//   - if the argument is absent or null, no header is expected, and a header
//     that is sent anyway is rejected (it would tell intermediaries a value
//     that the server does not use);
//   - otherwise the header must be present and equal the argument: a string
//     exactly, a boolean as true or false, a number numerically (as exact
//     decimals, so "42" matches 42, 42.0 and 4.2e1); an object or array
//     argument never matches.
//
// An argument object that holds, at any step of an annotated path, a key
// that equals the annotated property name only when case is ignored is
// rejected as ambiguous, because encoding/json matches struct fields
// case-insensitively.
//
// Arguments that are empty, null, not an object, or not valid JSON hold no
// annotated values; malformed arguments are left for argument decoding to
// report. It returns nil when the headers are valid.
func CheckParamHeaders(h http.Header, params map[string][]string, args []byte) *HeaderError {
	if len(params) == 0 {
		return nil
	}
	var obj any
	if trimmed := bytes.Trim(args, " \t\r\n"); len(trimmed) > 0 && json.Valid(trimmed) { // JSON whitespace only
		dec := json.NewDecoder(bytes.NewReader(trimmed))
		dec.UseNumber()
		if dec.Decode(&obj) != nil {
			obj = nil
		}
	}
	names := make([]string, 0, len(params))
	for x := range params {
		names = append(names, x)
	}
	slices.Sort(names)
	c := paramCheck{h: foldHeaders(h), keys: map[string]map[string][]string{}}
	for _, x := range names {
		if e := c.param(x, params[x], obj); e != nil {
			return e
		}
	}
	return nil
}

// paramCheck holds what checking one request's parameters reads more than
// once, indexed once so that the check costs time linear in the headers
// and arguments, whatever the number of parameters.
type paramCheck struct {
	h    map[string][]string            // header values by folded name
	keys map[string]map[string][]string // per object on a path: keys by folded key
}

// foldHeaders indexes h by header name ignoring case, as headerValue
// matches names, with surrounding spaces and tabs removed from values.
func foldHeaders(h http.Header) map[string][]string {
	out := make(map[string][]string, len(h))
	for k, vs := range h {
		f := foldKey(k)
		for _, v := range vs {
			out[f] = append(out[f], strings.Trim(v, " \t"))
		}
	}
	return out
}

// foldKey maps strings that are equal under strings.EqualFold (Unicode
// simple folding) to one string: each rune becomes the smallest of its
// folding orbit, except that ASCII letters become lower case, so that a
// lower-case ASCII string is its own folding and costs nothing.
func foldKey(s string) string {
	plain := true
	for i := 0; i < len(s) && plain; i++ {
		plain = s[i] < utf8.RuneSelf && !('A' <= s[i] && s[i] <= 'Z')
	}
	if plain {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range s {
		for {
			r2 := unicode.SimpleFold(r)
			if r2 <= r {
				r = r2
				break
			}
			r = r2
		}
		if 'A' <= r && r <= 'Z' {
			r += 'a' - 'A'
		}
		b.WriteRune(r)
	}
	return b.String()
}

func (c *paramCheck) param(x string, path []string, obj any) *HeaderError {
	header := ParamHeaderPrefix + x
	argName := strings.Join(path, ".")

	vs := c.h[foldKey(header)]
	if len(vs) > 1 {
		return headerErr(header, "multiple %s headers", header)
	}
	present := len(vs) == 1
	var hv string
	if present {
		if !visibleASCII(vs[0]) {
			return headerErr(header, "%s header has invalid characters", header)
		}
		d, err := DecodeHeaderValue(vs[0])
		if err != nil {
			return headerErr(header, "%s header is not valid base64", header)
		}
		hv = d
	}

	val, found, clash := c.lookup(obj, path)
	if clash != "" {
		return headerErr(header, "argument key %s differs from parameter %s only in case", quote(clash), quote(argName))
	}
	if !found || val == nil {
		if present {
			return headerErr(header, "unexpected %s header for absent or null argument %s", header, quote(argName))
		}
		return nil
	}
	if !present {
		return headerErr(header, "missing %s header for argument %s", header, quote(argName))
	}
	var body string
	var equal bool
	switch v := val.(type) {
	case string:
		body, equal = v, hv == v
	case bool:
		body = strconv.FormatBool(v)
		equal = hv == body
	case json.Number:
		body = string(v)
		equal = numEqual(hv, body)
	default:
		return headerErr(header, "argument %s is not a string, integer or boolean", quote(argName))
	}
	if !equal {
		return headerErr(header, "%s header %s does not match body %s", header, quote(hv), quote(body))
	}
	return nil
}

// lookup follows path through nested objects. clash names a key that
// equals a path step only when case is ignored (the smallest such key).
func (c *paramCheck) lookup(obj any, path []string) (val any, found bool, clash string) {
	cur := obj
	for i, step := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false, ""
		}
		prefix := strings.Join(path[:i], "\x00")
		folded, ok := c.keys[prefix]
		if !ok {
			folded = make(map[string][]string, len(m))
			for k := range m {
				f := foldKey(k)
				folded[f] = append(folded[f], k)
			}
			c.keys[prefix] = folded
		}
		for _, k := range folded[foldKey(step)] {
			if k != step && (clash == "" || k < clash) {
				clash = k
			}
		}
		if clash != "" {
			return nil, false, clash
		}
		if cur, ok = m[step]; !ok {
			return nil, false, ""
		}
	}
	return cur, true, ""
}

// visibleASCII reports whether s holds only printable ASCII (space
// included). Tabs, other controls and non-ASCII bytes must be sent
// Base64-encoded.
func visibleASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// numEqual reports whether the header text h and the JSON number b are the
// same number. h is a decimal with an optional '-', fraction and exponent;
// leading zeros are allowed. Comparison is exact, in time linear in the
// lengths (exponents of any length included).
func numEqual(h, b string) bool {
	x, ok1 := decimal.Parse(h, false)
	y, ok2 := decimal.Parse(b, false)
	return ok1 && ok2 && x == y
}
