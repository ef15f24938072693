package mcphandler

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"

	"github.com/mcphandler/mcphandler/internal/jsonrpc"
)

// gates are the restrictions of one tool, resource, template or prompt: a
// least role and the OAuth scopes a caller's token needs.
type gates struct {
	minRole string
	scopes  []string
}

// admits reports whether role passes the gate minRole.
func (c *catalog) admits(minRole, role string) bool {
	if minRole == "" {
		return true
	}
	need, ok := c.roleRank[minRole]
	if !ok {
		return false
	}
	have, ok := c.roleRank[role]
	return ok && have >= need
}

// visible reports whether an entry with gates g exists for id: its role
// admits id and, when out-of-scope entries are hidden, id has its scopes.
func (c *catalog) visible(g gates, id Identity) bool {
	return c.admits(g.minRole, id.Role) && (!c.cfg.Scopes.Hide || len(missingScopes(id.Scopes, g.scopes)) == 0)
}

// gate returns the entries of list visible to id, without modifying the
// host's slice.
func gate[T any](c *catalog, list []T, id Identity, of func(*T) gates) []T {
	return keep(list, func(x *T) bool { return c.visible(of(x), id) })
}

// keep returns the entries of list for which ok reports true, in order:
// list itself when it keeps them all, else a new slice. It never modifies
// list, which is the host's and may be read by other requests at the
// same time.
func keep[T any](list []T, ok func(*T) bool) []T {
	for i := range list {
		if !ok(&list[i]) {
			out := make([]T, i, len(list))
			copy(out, list[:i])
			for j := i + 1; j < len(list); j++ {
				if ok(&list[j]) {
					out = append(out, list[j])
				}
			}
			return out
		}
	}
	return list
}

func missingScopes(have, need []string) []string {
	var missing []string
	for _, s := range need {
		if !slices.Contains(have, s) {
			missing = append(missing, s)
		}
	}
	return missing
}

// stepUp answers HTTP 403 with an insufficient_scope challenge when the
// caller's token lacks one of need, and reports whether it did.
func (c *catalog) stepUp(rq *request, m *jsonrpc.Message, need []string) bool {
	missing := missingScopes(rq.id.Scopes, need)
	if len(missing) == 0 {
		return false
	}
	challenge := `Bearer error="insufficient_scope", scope=` + quotedString(strings.Join(need, " "))
	if c.cfg.Scopes.Challenge != nil {
		// The request carries the caller in its context (IdentityFrom),
		// so the challenge can name the scopes already granted too.
		challenge = c.cfg.Scopes.Challenge(rq.r.WithContext(rq.ctx), need)
	}
	rq.st.w.Header().Set("WWW-Authenticate", challenge)
	rq.st.status = http.StatusForbidden
	data, _ := json.Marshal(map[string]any{"requiredScopes": need})
	rq.fail(m.ID, rpcErrorData(CodeForbidden, "Insufficient scope", data))
	return true
}

// quotedString returns s as an RFC 9110 quoted-string: '"' and '\'
// escaped, control characters (which a quoted-string cannot hold) dropped,
// so that a scope name cannot end the parameter and add others.
func quotedString(s string) string {
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r < 0x20 && r != '\t', r == 0x7f:
			continue
		case r == '"' || r == '\\':
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	b.WriteByte('"')
	return b.String()
}
