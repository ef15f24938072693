package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
)

// Detect finds out how ep.URL is spoken to (ep.Era is ignored) and the
// protocol version it speaks, trying the newest era first, as the
// revisions say a dual-era client does:
//
//  1. server/discover as 2026-07-28: a result whose supportedVersions
//     lists 2026-07-28 is Stateless;
//  2. initialize as 2025-11-25: a session on an agreed 2025 revision is
//     Sessions (the session is ended at once);
//  3. GET as the 2024-11-05 SSE URL: an endpoint event and a 2024-11-05
//     initialize is Legacy (the stream is closed at once).
//
// An era that answers with a 4xx other than the ones below, or with
// something that is not its protocol, leads to the next. A failure that
// says nothing about the era is an error, not an era: an auth failure (a
// *StatusError with 401 or 403), a transient failure (a *StatusError with
// 408, 425, 429 or a 5xx; the HTTP client's errors), the end of ctx or of
// the Timeout, [ErrTooLarge]. Nothing found at all is [ErrUnsupported].
// Callers should keep the result rather than detect before every
// operation: each step costs round trips.
//
// Some upstreams list only 2026-07-28 in server/discover yet serve 2025
// sessions; set Endpoint.Era to override what Detect finds.
//
// It is safe for concurrent use.
func Detect(ctx context.Context, ep Endpoint) (Era, string, error) {
	e, err := ep.check()
	if err != nil {
		return Probe, "", err
	}
	ctx, cancel := context.WithTimeout(ctx, e.timeout)
	defer cancel()
	return detect(ctx, e)
}

func detect(ctx context.Context, e *endpoint) (Era, string, error) {
	c := &call{ep: e, caps: clientCaps{raw: []byte("{}")}}
	res, err := (&stateless{c: c}).request(ctx, "server/discover", nil, "")
	if err == nil {
		if slices.Contains(stringList(members(res)["supportedVersions"]), statelessVersion) {
			return Stateless, statelessVersion, nil
		}
	} else if stopsDetection(err) {
		return Probe, "", err
	}

	s, err := openSession(ctx, c)
	s.close(ctx)
	if err == nil {
		return Sessions, s.version, nil
	} else if stopsDetection(err) {
		return Probe, "", err
	}

	l, err := openLegacy(ctx, c)
	l.close(ctx)
	if err == nil {
		return Legacy, l.version, nil
	} else if stopsDetection(err) {
		return Probe, "", err
	}
	return Probe, "", fmt.Errorf("%w: no era answered at %s (the last: %v)", ErrUnsupported, e.url.Redacted(), err)
}

// stopsDetection reports whether err ends detection: it says nothing
// about the era, only that the upstream could not be asked.
func stopsDetection(err error) bool {
	var se *StatusError
	if errors.As(err, &se) {
		return se.Auth() || se.Transient()
	}
	switch {
	case errors.Is(err, ErrMalformed), errors.Is(err, ErrUnsupported), errors.As(err, new(*RPCError)):
		return false // this era's protocol is not what the upstream speaks
	}
	return true // the ctx, the HTTP client, ErrTooLarge, ErrTooMany
}

// stringList decodes a JSON array of strings; anything else is none.
func stringList(raw []byte) []string {
	var vs []string
	if json.Unmarshal(raw, &vs) != nil {
		return nil
	}
	return vs
}
