package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/gateway/internal/upstream"
)

// StatusMetaKey is the _meta key under which [Gateway.Tools] reports, in
// the tools/list result being built (mcphandler.AddListMeta), how each of
// the caller's upstreams fared, by id:
//
//	"dev.mcphandler/upstreams": {
//	  "docs": {"status": "ok"},
//	  "wiki": {"status": "stale", "error": "unreachable", "retryAfterMs": 27000},
//	  "jira": {"status": "failed", "error": "auth"},
//	  "crm":  {"status": "failed", "error": "credentials"}
//	}
//
// status is "ok" (listed now, or from a list still fresh), "stale" (not
// listed now: its last good tools are listed, within Config.Grace) or
// "failed" (its tools are left out). error is a short class of the last
// failure, never the upstream's own words: "unreachable", "timeout",
// "auth", "http_status", "rpc_error", "malformed", "too_large",
// "too_many", "unsupported", "authorization" (the caller has not
// authorized the upstream, which acts as each person: authorizeUrl is
// the link, signed for them, where they do; see Upstream.OAuth), "busy" (this replica had Config.MaxConcurrent
// requests in flight to it: it was not contacted), or "credentials": the upstream was not
// contacted, for the caller has no credentials there now (its
// Upstream.Credentials gave none; see CredentialSource), which says
// nothing of the upstream and nothing of another caller. retryAfterMs,
// present while the upstream's breaker keeps it from being contacted,
// says when it may be again.
const StatusMetaKey = "dev.mcphandler/upstreams"

// classCredentials is the class of an upstream left out of a list for
// want of the caller's credentials there.
const classCredentials = "credentials"

// classBusy is the class of an upstream not listed now for the requests
// in flight to it (Config.MaxConcurrent).
const classBusy = "busy"

// The statuses of an upstream in a list.
const (
	statusOK     = "ok"
	statusStale  = "stale"
	statusFailed = "failed"
)

// upstreamStatus is how one upstream fared in one list.
type upstreamStatus struct {
	status     string
	class      string        // the failure's class; "" when ok
	retryAfter time.Duration // > 0 while the breaker is open
	err        error         // the failure, for Strict
	freshFor   time.Duration // ok: how long the list served stays fresh
	// authorize, when the caller must authorize the upstream first
	// (Upstream.OAuth), names where.
	authorize *AuthorizationRequiredError
}

// limitTTL lowers the ttlMs of the tools/list being built in ctx to how
// long every upstream's part of it stays fresh: an ok upstream's list,
// for what is left of its fresh period; a stale or failed one, until its
// breaker lets it be asked again (retryAfterMs), or at once.
func (g *Gateway) limitTTL(ctx context.Context, sts []upstreamStatus) {
	d, limited := time.Duration(0), false
	for _, st := range sts {
		f := st.freshFor
		if st.status != statusOK {
			f = st.retryAfter
		}
		if !limited || f < d {
			d, limited = f, true
		}
	}
	if limited {
		_ = mcphandler.LimitListTTL(ctx, d)
	}
}

// failureClass is the short class of an upstream failure that a client
// may be told: never the upstream's text.
func failureClass(err error) string {
	var se *upstream.StatusError
	var rpc *upstream.RPCError
	switch {
	case errors.Is(err, ErrBusy):
		return classBusy
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.As(err, &se) && se.Auth():
		return "auth"
	case se != nil:
		return "http_status"
	case errors.As(err, &rpc):
		return "rpc_error"
	case errors.Is(err, upstream.ErrMalformed):
		return "malformed"
	case errors.Is(err, upstream.ErrTooLarge):
		return "too_large"
	case errors.Is(err, upstream.ErrTooMany):
		return "too_many"
	case errors.Is(err, upstream.ErrUnsupported):
		return "unsupported"
	}
	return "unreachable"
}

// report adds the statuses of ups to the list being built in ctx, if
// one is (a tools/call's lookup builds none). Past the seam's size, only
// the upstreams that are not ok are reported.
func (g *Gateway) report(ctx context.Context, ups []Upstream, sts []upstreamStatus) {
	if len(ups) == 0 {
		return
	}
	err := mcphandler.AddListMeta(ctx, StatusMetaKey, appendStatuses(nil, ups, sts, false))
	if err != nil && !errors.Is(err, mcphandler.ErrNotListing) {
		err = mcphandler.AddListMeta(ctx, StatusMetaKey, appendStatuses(nil, ups, sts, true))
	}
	if err != nil && !errors.Is(err, mcphandler.ErrNotListing) {
		g.cfg.Logger.Warn("gateway: upstream statuses not reported in the list", "upstreams", len(ups), "err", err)
	}
}

// appendStatuses appends the StatusMetaKey object of ups, by id
// (notOK: only those that are not ok).
func appendStatuses(b []byte, ups []Upstream, sts []upstreamStatus, notOK bool) []byte {
	order := make([]int, 0, len(ups))
	for i := range ups {
		if !notOK || sts[i].status != statusOK {
			order = append(order, i)
		}
	}
	slices.SortFunc(order, func(a, b int) int { return strings.Compare(ups[a].ID, ups[b].ID) })
	b = append(b, '{')
	for n, i := range order {
		if n > 0 {
			b = append(b, ',')
		}
		st := &sts[i]
		b = append(b, '"')
		b = append(b, ups[i].ID...) // checked: a-z 0-9 -
		b = append(b, `":{"status":"`...)
		b = append(b, st.status...)
		b = append(b, '"')
		if st.class != "" {
			b = append(b, `,"error":"`...)
			b = append(b, st.class...)
			b = append(b, '"')
		}
		if st.authorize != nil {
			u, _ := json.Marshal(st.authorize.URL)
			b = append(b, `,"authorizeUrl":`...)
			b = append(b, u...)
		}
		if st.retryAfter > 0 {
			b = append(b, `,"retryAfterMs":`...)
			b = strconv.AppendInt(b, retryMs(st.retryAfter), 10)
		}
		b = append(b, '}')
	}
	return append(b, '}')
}
