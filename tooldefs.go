package mcphandler

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"strconv"
	"sync"
)

// Tool definitions the handler cannot serve.
//
// ListTools runs per request and returns whatever the host built, maybe
// from configuration or tenants' input. A definition the handler cannot
// serve must not break the wire for the others (an InputSchema that is
// not JSON would make the whole tools/list invalid JSON), nor be served
// half: it is left out, on every revision, as if the host had not
// returned it. It is not listed, a tools/call of it answers exactly like
// one of an unknown tool, and it is logged once (at Error level, with its
// name and the reason). [CheckTools] lists every problem of a tool set at
// once, for a test or a check at startup.
//
// A definition is left out when
//   - its Name is empty, longer than maxToolNameBytes (128) bytes, or has
//     a character outside A-Z a-z 0-9 _ - . (the spec's guidance for tool
//     names, 2025-11-25);
//   - another tool of the same list has the same Name: every tool of that
//     name is left out, since nothing tells which one the host meant (and
//     a hook's order may differ between the list and the call);
//   - its Handler is nil;
//   - its MinRole is set but not in Config.Roles (it would admit nobody);
//   - its TaskSupport is not TaskNone, TaskOptional or TaskRequired;
//   - its InputSchema or OutputSchema, when set, is not valid JSON
//     without repeated keys (nesting at most 128 deep), is not a JSON
//     object, or cannot be compiled by github.com/google/jsonschema-go
//     (draft 2020-12, or draft-07 when $schema says so; no remote $ref);
//   - its InputSchema's references loop or fan out past 1024 paths, or
//     take a form the check of that cannot read (schema_refs.go);
//   - its InputSchema's x-mcp-header annotations break the rules of
//     2026-07-28 (see internal/mcpheaders).
//
// The checks of a schema are cached by its bytes (schema_cache.go). The
// rest costs a pass over the list and, past 16 tools, a hash of each
// name into a set (duplicateNames).

// maxToolNameBytes is the longest tool name served.
const maxToolNameBytes = 128

// toolNameByte holds the bytes a tool name may use.
var toolNameByte = func() (ok [256]bool) {
	for c := range 256 {
		ok[c] = 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-' || c == '.'
	}
	return ok
}()

// toolNameProblem says why name cannot be a tool's name ("" when it can).
func toolNameProblem(name string) string {
	switch {
	case name == "":
		return "its name is empty"
	case len(name) > maxToolNameBytes:
		return "its name is " + strconv.Itoa(len(name)) + " bytes, more than " + strconv.Itoa(maxToolNameBytes)
	}
	for i := 0; i < len(name); i++ {
		if !toolNameByte[name[i]] {
			return "its name has a character outside A-Z a-z 0-9 _ - . (the spec's guidance for tool names)"
		}
	}
	return ""
}

// toolProblem says why t cannot be served ("" when it can), a duplicated
// name aside, and returns what schemas made of its input schema (nil when
// it has none). roles are the ranks of Config.Roles.
func toolProblem(t *Tool, roles map[string]int, schemas *schemaCache) (*schemaInfo, string) {
	if p := toolNameProblem(t.Name); p != "" {
		return nil, p
	}
	if t.Handler == nil {
		return nil, "it has no Handler"
	}
	if t.MinRole != "" {
		if _, ok := roles[t.MinRole]; !ok {
			return nil, "its MinRole " + strconv.Quote(clip(t.MinRole, 64)) + " is not in Config.Roles"
		}
	}
	switch t.TaskSupport {
	case TaskNone, TaskOptional, TaskRequired:
	default:
		return nil, "its TaskSupport " + strconv.Quote(clip(string(t.TaskSupport), 64)) + " is not TaskNone, TaskOptional or TaskRequired"
	}
	var in *schemaInfo
	if len(t.InputSchema) > 0 {
		in = schemas.get(t.InputSchema)
		if p := in.inputProblem(); p != "" {
			return nil, p
		}
	}
	if len(t.OutputSchema) > 0 {
		if p := schemas.get(t.OutputSchema).outputProblem(); p != "" {
			return nil, p
		}
	}
	return in, ""
}

// duplicateProblem is the reason of a name used by n tools.
func duplicateProblem(n int) string {
	return "its name is used by " + strconv.Itoa(n) + " tools"
}

// listProblem says why t, one of a list whose shared names dups counts
// (duplicateNames), cannot be served ("" when it can).
func listProblem(t *Tool, dups, roles map[string]int, schemas *schemaCache) string {
	if n := dups[t.Name]; n > 1 {
		return duplicateProblem(n)
	}
	_, p := toolProblem(t, roles, schemas)
	return p
}

// duplicateNames counts the names that more than one of tools use; nil
// when there are none. A short list is compared pairwise; a longer one
// goes through a set of keyed 64-bit hashes of its names (an open
// addressing table, pooled: a list without duplicates, the usual case,
// allocates nothing), and is counted exactly only when two hashes are
// equal.
func duplicateNames(tools []Tool) map[string]int {
	if len(tools) <= 16 {
		if !anyDuplicate(tools) {
			return nil
		}
		return countNames(tools)
	}
	size := 1
	for size < 2*len(tools) {
		size <<= 1
	}
	p := nameHashes.Get().(*[]uint64)
	if cap(*p) < size {
		*p = make([]uint64, size)
	}
	set := (*p)[:size]
	clear(set)
	same := false
	for i := 0; i < len(tools) && !same; i++ {
		h := maphash.String(nameSeed, tools[i].Name) | 1 // 0 marks a free slot
		for j := h & uint64(size-1); ; j = (j + 1) & uint64(size-1) {
			if set[j] == 0 {
				set[j] = h
				break
			}
			if set[j] == h {
				same = true
				break
			}
		}
	}
	nameHashes.Put(p)
	if !same {
		return nil
	}
	return countNames(tools)
}

var (
	nameSeed   = maphash.MakeSeed()
	nameHashes = sync.Pool{New: func() any { return new([]uint64) }}
)

// anyDuplicate reports whether two of tools share a name, comparing them
// pairwise.
func anyDuplicate(tools []Tool) bool {
	for i := 1; i < len(tools); i++ {
		for j := range i {
			if tools[i].Name == tools[j].Name {
				return true
			}
		}
	}
	return false
}

// countNames counts the names that more than one of tools use; nil when
// there are none (two hashes may be equal without two names being so).
func countNames(tools []Tool) map[string]int {
	counts := make(map[string]int, len(tools))
	for i := range tools {
		counts[tools[i].Name]++
	}
	for name, n := range counts {
		if n == 1 {
			delete(counts, name)
		}
	}
	if len(counts) == 0 {
		return nil
	}
	return counts
}

// servableTools returns tools without the definitions the handler cannot
// serve, each logged once. It never modifies the host's slice.
func (c *catalog) servableTools(ctx context.Context, tools []Tool) []Tool {
	dups := duplicateNames(tools)
	return keep(tools, func(t *Tool) bool {
		if p := listProblem(t, dups, c.roleRank, &c.schemas); p != "" {
			c.badTool(ctx, t.Name, p)
			return false
		}
		return true
	})
}

// servableTool returns the tool called name among tools, with what the
// handler made of its input schema, or false when there is none the
// handler can serve (a bad definition is logged once).
func (c *catalog) servableTool(ctx context.Context, tools []Tool, name string) (Tool, bool) {
	at, n := -1, 0
	for i := range tools {
		if tools[i].Name == name {
			if at < 0 {
				at = i
			}
			n++
		}
	}
	if at < 0 {
		return Tool{}, false
	}
	if n > 1 {
		c.badTool(ctx, name, duplicateProblem(n))
		return Tool{}, false
	}
	t := tools[at]
	in, p := toolProblem(&t, c.roleRank, &c.schemas)
	if p != "" {
		c.badTool(ctx, name, p)
		return Tool{}, false
	}
	t.input = in
	return t, true
}

// badDefLog remembers which bad definitions (kind, name and reason) were
// logged, so that each is logged once however many requests see it. It
// keeps a keyed 64-bit hash of each (hash/maphash, seeded at random), at
// most badDefLogSize of them: past that, one more line says so and
// further bad definitions are left out without a line each, so neither
// memory nor the log grows with names a host makes up per request. Tools
// and skills share it.
type badDefLog struct {
	once sync.Once // sets seed and seen: the zero badDefLog is ready
	seed maphash.Seed

	mu   sync.Mutex // guards seen and full
	seen map[uint64]struct{}
	full bool
}

// badDefLogSize bounds the bad definitions logged by one Handler, and
// maxReasonBytes the reason in each line (a schema's compile error may
// quote the schema).
const (
	badDefLogSize  = 1024
	maxReasonBytes = 512
)

// A kind of definition a host's hook returns: its name in log lines, and
// what a client gets for a left-out one.
type defKind struct{ name, answer string }

var (
	toolDef  = defKind{"tool", "not listed, and called it answers as an unknown tool"}
	skillDef = defKind{"skill", "not listed, and read it answers as an unknown skill"}
)

// badTool logs, once, that the tool definition called name is left out
// for reason.
func (c *catalog) badTool(ctx context.Context, name, reason string) {
	c.badDefinition(ctx, toolDef, name, reason)
}

// badDefinition logs, once, that the definition of kind called name is
// left out for reason.
func (c *catalog) badDefinition(ctx context.Context, kind defKind, name, reason string) {
	l := &c.badDefs
	l.once.Do(func() { l.seed, l.seen = maphash.MakeSeed(), make(map[uint64]struct{}) })
	var mh maphash.Hash
	mh.SetSeed(l.seed)
	mh.WriteString(kind.name)
	mh.WriteByte(0)
	mh.WriteString(reason)
	mh.WriteByte(0)
	mh.WriteString(name)
	k := mh.Sum64()
	l.mu.Lock()
	_, seen := l.seen[k]
	fills := false
	switch {
	case seen:
	case len(l.seen) < badDefLogSize:
		l.seen[k] = struct{}{}
	default:
		seen, fills, l.full = true, !l.full, true
	}
	l.mu.Unlock()
	switch {
	case fills:
		c.log(ctx).Error("mcphandler: more than " + strconv.Itoa(badDefLogSize) +
			" tool or skill definitions were left out; further ones are left out without a log line each (CheckTools lists a tool set's)")
	case !seen:
		c.log(ctx).Error("mcphandler: "+kind.name+" definition left out: "+kind.answer,
			kind.name, logToolName(name), "reason", clip(reason, maxReasonBytes))
	}
}

// logToolName bounds a tool name for a log line.
func logToolName(name string) string {
	if len(name) <= maxToolNameBytes {
		return name
	}
	return clip(name, maxToolNameBytes) + "…"
}

// CheckTools reports every problem that would make a handler built from
// cfg leave one of tools out (see [Tool] for what it serves): each as an
// error naming the tool, joined with [errors.Join]; nil when the handler
// serves them all. Only cfg.Roles is read. Use it in a test, or at
// startup, on the tools ListTools returns: a handler logs a bad
// definition once, and serves the others.
func CheckTools(cfg Config, tools []Tool) error {
	roles := make(map[string]int, len(cfg.Roles))
	for i, r := range cfg.Roles {
		roles[r] = i
	}
	var schemas schemaCache
	dups := duplicateNames(tools)
	var errs []error
	for i := range tools {
		if p := listProblem(&tools[i], dups, roles, &schemas); p != "" {
			errs = append(errs, fmt.Errorf("mcphandler: tool %d (%q): %s", i, logToolName(tools[i].Name), p))
		}
	}
	return errors.Join(errs...)
}
