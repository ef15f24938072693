package mcphandler

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mcphandler/mcphandler/internal/canon"
)

// ErrNotListing is AddListMeta's answer for a context in which no
// tools/list result is being built: a tools/call's lookup, another
// method's look at the tools (initialize), a list already answered, or a
// context of no request at all.
var ErrNotListing = errors.New("mcphandler: no tools/list is being built in this context")

// Bounds of what AddListMeta adds to one list result.
const (
	// maxListMetaMembers is the most members one list result gets.
	maxListMetaMembers = 8
	// maxListMetaBytes bounds the members of one list result together,
	// keys and values as written.
	maxListMetaBytes = 64 << 10
	// maxListMetaKey bounds a key.
	maxListMetaKey = 256
)

// AddListMeta adds the member key: value to the _meta object of the
// tools/list result being built for the request in ctx. It is meant for
// Config.ListTools (and what it calls with its ctx, such as a gateway
// reporting its upstreams): the member goes out with that list, on each of
// its pages, and with nothing else.
//
// On 2026-07-28 the member is written in the result's _meta after
// io.modelcontextprotocol/serverInfo; on the 2025 revisions and
// 2024-11-05 the result gets a _meta object holding the members added,
// in the order added. A list to which nothing was added is written
// exactly as without this function, and costs nothing more.
//
// key must have a prefix, as the specification's _meta keys do:
// dot-separated labels (each starting with a letter, ending with a letter
// or digit, with letters, digits and hyphens between), a slash, and a
// name of letters, digits, '-', '_' and '.' starting and ending with a
// letter or digit; at most 256 bytes. A prefix with a label
// "modelcontextprotocol" or "mcp" (any case) is refused: the
// specification reserves such prefixes (io.modelcontextprotocol/,
// modelcontextprotocol.io/, dev.mcp/, …) for itself, and this refuses a
// little more than it must rather than less. value must be one JSON value
// without repeated keys (whitespace around it is dropped, and nesting is
// at most 128 deep); it is written as given. One list takes at most 8
// members, keys and values 64 KiB together; a key added twice, a ninth
// member or one past the size is refused, and the members already added
// stay.
//
// It returns ErrNotListing when ctx builds no tools/list: a ListTools run
// for a tools/call, for initialize's capabilities, after the list
// returned, or outside any request; and a descriptive error for a member
// it refuses. Nothing refused reaches the wire. It is safe to call from
// several goroutines during one ListTools; one that calls after ListTools
// returned gets ErrNotListing.
func AddListMeta(ctx context.Context, key string, value json.RawMessage) error {
	ri, ok := ctx.Value(ctxKey{}).(*reqInfo)
	if !ok || ri == nil {
		return ErrNotListing
	}
	if err := checkMetaKey(key); err != nil {
		return err
	}
	v := trimJSONSpace(value)
	if len(key)+len(v)+4 > maxListMetaBytes {
		return errors.New("mcphandler: AddListMeta: " + key + ": past the list's " + strconv.Itoa(maxListMetaBytes>>10) + " KiB of _meta members")
	}
	if err := canon.Check(v, canon.Limits{}); err != nil {
		return errors.New("mcphandler: AddListMeta: " + key + ": the value is not one JSON value without repeated keys: " + err.Error())
	}
	return ri.list.add(key, v)
}

// listMeta holds the members AddListMeta added to one tools/list result.
// It is part of the request's reqInfo, so a request that adds none pays
// nothing. listTools opens it around its ListTools call (begin, end);
// AddListMeta adds under mu while it is open; once ended, members is
// read by the request's own goroutine without mu, as nothing writes it
// any more.
type listMeta struct {
	mu      sync.Mutex
	open    bool
	keys    []string
	members []byte // `"key":value` members, comma-separated
	ttl     time.Duration
	limited bool // LimitListTTL was called: ttl bounds the result's ttlMs
	// lookup is the name a tools/call looks up while its ListTools runs
	// (ToolLookupFrom); "" otherwise.
	lookup string
}

// ToolLookupFrom returns the tool name a tools/call looks up, while
// Config.ListTools runs for that lookup with ctx (and what it calls with
// its ctx), on every path a call is looked up: the asker's request, and a
// replica taking a confirmed or approved call over. It reports false in
// any other context: a tools/list, another method's look at the tools,
// after ListTools returned, or outside any request.
//
// A ListTools that cannot list some tools yet may use it to serve the one
// asked for: a gateway whose caller has not yet authorized an upstream
// answers a call of any of that upstream's names with the authorization
// request. The name is the client's, unchecked: it is not a tool the
// caller can see until ListTools returns one of that name. It is safe to
// call from several goroutines during one ListTools.
func ToolLookupFrom(ctx context.Context) (string, bool) {
	ri, ok := ctx.Value(ctxKey{}).(*reqInfo)
	if !ok || ri == nil {
		return "", false
	}
	l := &ri.list
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lookup, l.lookup != ""
}

// setLookup marks the ListTools run with ctx as the lookup of name (""
// ends it). ctx without a request: nothing to mark.
func setLookup(ctx context.Context, name string) {
	if ri, ok := ctx.Value(ctxKey{}).(*reqInfo); ok && ri != nil {
		ri.list.mu.Lock()
		ri.list.lookup = name
		ri.list.mu.Unlock()
	}
}

func (l *listMeta) add(key string, v []byte) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case !l.open:
		return ErrNotListing
	case len(l.keys) >= maxListMetaMembers:
		return errors.New("mcphandler: AddListMeta: " + key + ": the list has " + strconv.Itoa(maxListMetaMembers) + " _meta members already")
	case len(l.members)+len(key)+len(v)+4 > maxListMetaBytes:
		return errors.New("mcphandler: AddListMeta: " + key + ": past the list's " + strconv.Itoa(maxListMetaBytes>>10) + " KiB of _meta members")
	}
	for _, k := range l.keys {
		if k == key {
			return errors.New("mcphandler: AddListMeta: " + key + " was added already")
		}
	}
	l.keys = append(l.keys, key)
	if len(l.members) > 0 {
		l.members = append(l.members, ',')
	}
	l.members = append(l.members, '"')
	l.members = append(l.members, key...) // checked: nothing to escape
	l.members = append(l.members, `":`...)
	l.members = append(l.members, v...)
	return nil
}

// LimitListTTL lowers the ttlMs cache hint of the tools/list result being
// built for the request in ctx to at most d: a host whose list holds
// something fresh for less than Config.CacheTTL (a gateway serving an
// upstream's list that expires sooner, or an upstream that just failed)
// says so. Several calls keep the smallest; a d below zero counts as 0
// (stale at once); a d larger than Config.CacheTTL changes nothing. It
// applies to 2026-07-28 results, the only ones with cache hints, and to
// each page of the list; the 2025 revisions and 2024-11-05 have no hints,
// and the call changes nothing there.
//
// Like AddListMeta, it is meant for Config.ListTools and what it calls
// with its ctx, and returns ErrNotListing when ctx builds no tools/list
// (then nothing changes). It is safe to call from several goroutines
// during one ListTools.
func LimitListTTL(ctx context.Context, d time.Duration) error {
	ri, ok := ctx.Value(ctxKey{}).(*reqInfo)
	if !ok || ri == nil {
		return ErrNotListing
	}
	l := &ri.list
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.open {
		return ErrNotListing
	}
	d = max(d, 0)
	if !l.limited || d < l.ttl {
		l.ttl, l.limited = d, true
	}
	return nil
}

// listTTL returns the ttlMs hint of the request's list result: ttl, or
// less when LimitListTTL lowered it. Only after endList.
func (rq *request) listTTL(ttl time.Duration) time.Duration {
	if rq.info != nil && rq.info.list.limited {
		return min(ttl, rq.info.list.ttl)
	}
	return ttl
}

// beginList lets AddListMeta add to the list result of ri's request.
func (ri *reqInfo) beginList() {
	if ri == nil {
		return
	}
	ri.list.mu.Lock()
	ri.list.open = true
	ri.list.mu.Unlock()
}

// endList closes ri's list to AddListMeta; the members stay for the
// result.
func (ri *reqInfo) endList() {
	if ri == nil {
		return
	}
	ri.list.mu.Lock()
	ri.list.open = false
	ri.list.mu.Unlock()
}

// listMeta returns the members AddListMeta added to the request's list
// result, nil when none: the era's decorate writes them in the result's
// _meta. Only after endList.
func (rq *request) listMeta() []byte {
	if rq.info == nil {
		return nil
	}
	return rq.info.list.members
}

// checkMetaKey checks an AddListMeta key (see there).
func checkMetaKey(key string) error {
	bad := func(why string) error {
		return errors.New("mcphandler: AddListMeta: key " + strconv.Quote(clipEcho(key)) + " " + why)
	}
	if len(key) > maxListMetaKey {
		return bad("is longer than " + strconv.Itoa(maxListMetaKey) + " bytes")
	}
	prefix, name, ok := strings.Cut(key, "/")
	if !ok || prefix == "" {
		return bad("has no prefix (labels, then /)")
	}
	for label := range strings.SplitSeq(prefix, ".") {
		if !metaLabel(label) {
			return bad("has a prefix label that is not a letter, then letters, digits or hyphens, ending with a letter or digit")
		}
		if strings.EqualFold(label, "modelcontextprotocol") || strings.EqualFold(label, "mcp") {
			return bad("has a prefix the specification reserves")
		}
	}
	if !metaName(name) {
		return bad("has a name that is not letters, digits, '-', '_' and '.', starting and ending with a letter or digit")
	}
	return nil
}

func metaLabel(s string) bool {
	if s == "" || !isLetter(s[0]) || !isAlnum(s[len(s)-1]) {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isAlnum(s[i]) && s[i] != '-' {
			return false
		}
	}
	return true
}

func metaName(s string) bool {
	if s == "" || !isAlnum(s[0]) || !isAlnum(s[len(s)-1]) {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !isAlnum(c) && c != '-' && c != '_' && c != '.' {
			return false
		}
	}
	return true
}

func isLetter(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }
func isAlnum(c byte) bool  { return isLetter(c) || '0' <= c && c <= '9' }

// trimJSONSpace drops JSON's whitespace around b.
func trimJSONSpace(b []byte) []byte {
	isSpace := func(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }
	for len(b) > 0 && isSpace(b[0]) {
		b = b[1:]
	}
	for len(b) > 0 && isSpace(b[len(b)-1]) {
		b = b[:len(b)-1]
	}
	return b
}
