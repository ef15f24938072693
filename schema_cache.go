package mcphandler

import (
	"bytes"
	"encoding/json"
	"sync"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/mcphandler/mcphandler/internal/canon"
	"github.com/mcphandler/mcphandler/internal/mcpheaders"
)

// A tool's InputSchema and OutputSchema are sent verbatim, and the input
// schema is enforced: a call's arguments are validated against it before
// BeforeCall, whether NewTool derived it or the host wrote it by hand.
// Since ListTools runs per request, the same schemas come back on every
// request; schemaCache remembers what the handler made of each, so that
// each distinct schema is checked and compiled once, not per request.
//
// It is keyed by the schema's bytes, compared in full (a map keyed by
// string): a host that returns other bytes, in a new slice or the same
// slice rewritten, gets them checked, never a stale verdict.
//
// It holds at most schemaCacheEntries schemas and schemaCacheBytes bytes
// of schema text; a compiled schema takes about 20 times its text, so the
// cache stays under some 20 MiB. Past a bound, arbitrary entries are
// dropped to make room; a schema larger than schemaCacheBytes is checked
// and compiled on each use. The cache is shared by every tenant: schemas
// are the host's, and usually the same for all. It is safe for concurrent
// use; its zero value is ready.
type schemaCache struct {
	mu    sync.Mutex // guards m and bytes
	m     map[string]*schemaInfo
	bytes int // the summed length of m's keys
}

// The bounds of the schema cache.
const (
	schemaCacheEntries = 4096
	schemaCacheBytes   = 1 << 20
)

// schemaInfo is what the handler made of one schema.
type schemaInfo struct {
	// problem says why the schema cannot be served at all ("" when it
	// can): it is not valid JSON, holds a repeated key, nests deeper than
	// canon.DefaultMaxDepth, is not an object, or cannot be compiled.
	problem string
	// loops says why arguments cannot be validated against it ("" when
	// they can): its references loop or fan out (schema_refs.go). An
	// output schema, never validated against, may.
	loops string
	// headers are the x-mcp-header annotations of an input schema (nil
	// when none), and headerProblem why they are invalid ("" when they
	// are not).
	headers       map[string][]string
	headerProblem string
	// args checks a call's arguments against it; nil with any problem.
	args *argsValidator
}

// inputProblem says why the schema cannot be a tool's input schema.
func (si *schemaInfo) inputProblem() string {
	switch {
	case si.problem != "":
		return "its input schema " + si.problem
	case si.loops != "":
		return "its input schema cannot be validated: " + si.loops
	case si.headerProblem != "":
		return "its input schema's x-mcp-header annotations are invalid: " + si.headerProblem
	}
	return ""
}

// outputProblem says why the schema cannot be a tool's output schema.
func (si *schemaInfo) outputProblem() string {
	if si.problem != "" {
		return "its output schema " + si.problem
	}
	return ""
}

// get returns what the handler makes of the schema raw, from the cache or
// checked and compiled now.
func (c *schemaCache) get(raw []byte) *schemaInfo {
	c.mu.Lock()
	si := c.m[string(raw)]
	c.mu.Unlock()
	if si != nil {
		return si
	}
	si = compileSchema(raw)
	if len(raw) > schemaCacheBytes {
		return si
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if old := c.m[string(raw)]; old != nil {
		return old // compiled meanwhile by another request
	}
	if c.m == nil {
		c.m = make(map[string]*schemaInfo)
	}
	for len(c.m) >= schemaCacheEntries || c.bytes+len(raw) > schemaCacheBytes {
		for k := range c.m {
			delete(c.m, k)
			c.bytes -= len(k)
			break
		}
	}
	c.m[string(raw)] = si
	c.bytes += len(raw)
	return si
}

// compileSchema checks the schema raw and compiles its validator.
func compileSchema(raw []byte) *schemaInfo {
	if err := canon.Check(raw, canon.Limits{}); err != nil {
		return &schemaInfo{problem: "is not valid JSON without repeated keys: " + err.Error()}
	}
	if raw = bytes.TrimLeft(raw, " \t\r\n"); raw[0] != '{' {
		return &schemaInfo{problem: "is not a JSON object"}
	}
	full, err := resolveSchema(raw)
	if err != nil {
		return &schemaInfo{problem: "cannot be compiled: " + err.Error()}
	}
	si := &schemaInfo{}
	if err := checkRefs(full.Schema()); err != nil {
		si.loops = err.Error()
	} else {
		si.args = &argsValidator{flat: compileFlat(raw), full: full}
	}
	if bytes.Contains(raw, []byte("x-mcp-header")) {
		if si.headers, err = mcpheaders.ParamHeaders(raw); err != nil {
			si.headers, si.headerProblem = nil, err.Error()
		}
	}
	return si
}

// argsValidator checks a call's arguments against an input schema: first
// on the raw arguments when the schema is flat (schema_flat.go), else, or
// when that fast path is unsure, with the full JSON Schema validator,
// which decides and words the error.
type argsValidator struct {
	flat *flatSchema // nil when the schema is not flat
	full *jsonschema.Resolved
}

// check returns a bad_args ToolError when args do not conform.
func (v *argsValidator) check(args json.RawMessage) error {
	if v.flat != nil && v.flat.accept(args) {
		return nil // surely valid: the full validator would agree
	}
	var a any
	if err := json.Unmarshal(args, &a); err != nil {
		return BadArgs("arguments are not valid JSON")
	}
	if err := v.full.Validate(a); err != nil {
		return BadArgs("%s", schemaError(err))
	}
	return nil
}
