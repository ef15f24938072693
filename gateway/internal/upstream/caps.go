package upstream

import (
	"encoding/json"
	"errors"

	"github.com/mcphandler/mcphandler/internal/jsonrpc"
)

// clientCaps is the downstream client's capabilities as the upstream is
// told them, and what they let the upstream ask.
type clientCaps struct {
	raw                  []byte // the object sent upstream
	elicit, sample, root bool   // the questions the client declared it answers
}

// tasksExtension is the 2026-07-28 tasks extension's id.
const tasksExtension = "io.modelcontextprotocol/tasks"

// parseCaps checks the caller's capabilities object (nil or null: none)
// and removes what this package cannot carry: tasks (2025-11-25's
// client-side tasks, the tasks extension of 2026-07-28), since a call is
// relayed as one request and a task result, or a task-augmented question,
// would have nowhere to go. Everything else is passed as it is, so the
// upstream is told no more than the client declared.
func parseCaps(caps json.RawMessage) (clientCaps, error) {
	if len(caps) == 0 || string(caps) == "null" {
		return clientCaps{raw: []byte("{}")}, nil
	}
	if !isObject(caps) {
		return clientCaps{}, errors.New("upstream: capabilities must be a JSON object")
	}
	var c clientCaps
	var ms []member
	jsonrpc.Members(caps, func(k, v []byte) bool {
		key, _ := jsonrpc.String(k)
		switch key {
		case "tasks":
			return true
		case "extensions":
			if v = withoutMember(v, tasksExtension); v == nil {
				return true
			}
		case "elicitation":
			c.elicit = isObjectBytes(v)
		case "sampling":
			c.sample = isObjectBytes(v)
		case "roots":
			c.root = isObjectBytes(v)
		}
		ms = append(ms, member{key, v})
		return true
	})
	c.raw = object(ms...)
	return c, nil
}

// withoutMember returns the object obj without its member named key, or
// nil when obj is not an object.
func withoutMember(obj []byte, key string) []byte {
	if !isObjectBytes(obj) {
		return nil
	}
	var ms []member
	jsonrpc.Members(obj, func(k, v []byte) bool {
		if s, _ := jsonrpc.String(k); s != key {
			ms = append(ms, member{s, v})
		}
		return true
	})
	return object(ms...)
}

// allows reports whether the client declared the capability a
// server-to-client request needs.
func (c *clientCaps) allows(method string) bool {
	switch method {
	case "elicitation/create":
		return c.elicit
	case "sampling/createMessage":
		return c.sample
	case "roots/list":
		return c.root
	}
	return false
}
