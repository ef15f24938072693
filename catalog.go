package mcphandler

import (
	"context"
	"log/slog"
)

// catalog is what a caller sees: the tools, resources, resource
// templates, prompts and skills the host's hooks return for a request,
// narrowed to the caller by their gates (gate.go: MinRole, and Scopes
// when Config.Scopes.Hide), and the methods that list, read, get and
// complete them. It owns the step-up challenge of an entry whose scopes
// the caller's token lacks (stepUp), the checks that leave out a tool or
// skill definition the handler cannot serve (tooldefs.go, skills.go), the
// log of those left out (badDefs), what each tool schema compiles to
// (schemas, schema_cache.go) and the digests of skill files
// (skillDigests, skills_digest.go).
//
// It depends on the Handler's Config (the hooks, Roles, PageSize, the
// subscription bounds, and Store, where resources/subscribe records a
// session's subscriptions) and on log, which returns the logger for lines
// about the operation in a context (Handler.loggerFor). A method that
// answers a request does it through the request (reply, fail,
// hookFailed, storeFailed).
//
// A catalog keeps nothing about a caller between requests: every list is
// asked of its hook per request. It is safe for concurrent use: cfg and
// roleRank are read only once New returns, and the caches and the log
// guard themselves.
type catalog struct {
	cfg      *Config
	log      func(ctx context.Context) *slog.Logger
	roleRank map[string]int // the rank of each of Config.Roles

	skillDigests digestCache // skill manifest digests (skills_digest.go)
	schemas      schemaCache // what tools' schemas are made of (schema_cache.go)
	badDefs      badDefLog   // the bad tool and skill definitions logged (tooldefs.go)
}

// newCatalog returns the catalog of the Handler whose Config is cfg, with
// log the Handler's loggerFor.
func newCatalog(cfg *Config, log func(context.Context) *slog.Logger) *catalog {
	c := &catalog{cfg: cfg, log: log, roleRank: make(map[string]int, len(cfg.Roles))}
	for i, r := range cfg.Roles {
		c.roleRank[r] = i
	}
	return c
}
