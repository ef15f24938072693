package mcphandler

import (
	"encoding/base64"
	"encoding/json"
	"strconv"

	"github.com/mcphandler/mcphandler/internal/jsonrpc"
)

type listParams struct {
	Cursor string `json:"cursor"`
}

// page decodes params' cursor and returns the bounds of the page of a list
// of n entries, and the cursor of the next page ("" for the last).
func (c *catalog) page(params json.RawMessage, n int) (lo, hi int, next string, e *jsonrpc.Error) {
	var p listParams
	if len(params) > 0 {
		if err := json.Unmarshal(params, &p); err != nil {
			return 0, 0, "", invalidParams("Invalid params: " + jsonError(err))
		}
	}
	if p.Cursor != "" {
		off, ok := decodeCursor(p.Cursor, n)
		if !ok {
			return 0, 0, "", invalidParams("Invalid params: invalid cursor")
		}
		lo = off
	}
	hi = min(lo+c.cfg.Limits.PageSize, n)
	if hi < n {
		next = encodeCursor(hi)
	}
	return lo, hi, next, nil
}

// encodeCursor returns the opaque cursor of the page that starts at off:
// the offset in decimal, base64url without padding.
func encodeCursor(off int) string {
	return base64.RawURLEncoding.EncodeToString(strconv.AppendInt(nil, int64(off), 10))
}

// decodeCursor returns the offset of cursor into a list of n entries. Only
// the cursors encodeCursor makes for 0..n are valid: anything else (another
// spelling of an offset, an offset past n, a cursor of any length that is
// not one) reports false, at a cost linear in len(cursor).
func decodeCursor(cursor string, n int) (int, bool) {
	if len(cursor) == 0 || len(cursor) > 27 { // 20 digits of base64
		return 0, false
	}
	b, err := base64.RawURLEncoding.DecodeString(cursor)
	if err != nil || len(b) == 0 || b[0] < '0' || b[0] > '9' {
		return 0, false
	}
	off, err := strconv.Atoi(string(b))
	if err != nil || off < 0 || off > n || encodeCursor(off) != cursor {
		return 0, false
	}
	return off, true
}

// listPage answers a list method with one page of entries, marshalled with
// encoding/json.
func listPage[T any](c *catalog, rq *request, m *jsonrpc.Message, key string, entries []T) {
	lo, hi, next, perr := c.page(m.Params, len(entries))
	if perr != nil {
		rq.fail(m.ID, perr)
		return
	}
	page := entries[lo:hi]
	if page == nil {
		page = []T{}
	}
	res := map[string]any{key: page}
	if next != "" {
		res["nextCursor"] = next
	}
	b, err := json.Marshal(res)
	if err != nil {
		rq.hookFailed(m, "encoding "+key, err)
		return
	}
	rq.reply(m.ID, b)
}
