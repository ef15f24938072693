package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
)

// route is the HTTP client of one operation's mcptest client: it sends
// each request to the operation's home replica, or to the other one when
// toOther says so, which is how an answer, a poll or a DELETE reaches the
// replica that did not start the call. Every route shares one transport,
// so that the driver keeps a bounded pool of connections to each replica.
type route struct {
	base        http.RoundTripper
	home, other string // host:port
	toOther     func(r *http.Request, body []byte) bool
	sent        *atomic.Int64 // HTTP requests sent, both replicas
}

func (rt *route) client() *http.Client { return &http.Client{Transport: rt} }

func (rt *route) RoundTrip(r *http.Request) (*http.Response, error) {
	var body []byte
	if r.Body != nil && r.Body != http.NoBody {
		b, err := io.ReadAll(r.Body)
		r.Body.Close()
		if err != nil {
			return nil, err
		}
		body = b
	}
	host := rt.home
	if rt.toOther != nil && rt.toOther(r, body) {
		host = rt.other
	}
	out := r.Clone(r.Context())
	out.URL.Host, out.Host = host, host
	if body != nil {
		out.Body = io.NopCloser(bytes.NewReader(body))
		out.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	}
	if rt.sent != nil {
		rt.sent.Add(1)
	}
	return rt.base.RoundTrip(out)
}

// Predicates of route.toOther.

// answers sends a JSON-RPC response (the client's answer to a server
// request: a confirm, an approval's URL elicitation) to the other replica.
func answers(r *http.Request, body []byte) bool {
	return r.Method == http.MethodPost && isResponse(body)
}

// deletes sends the session's DELETE to the other replica.
func deletes(r *http.Request, _ []byte) bool { return r.Method == http.MethodDelete }

// posts sends every POST to the other replica (the 2024-11-05 transport's
// messages, whose stream stays on the home replica).
func posts(r *http.Request, _ []byte) bool { return r.Method == http.MethodPost }

// taskRequests sends tasks/* requests to the other replica.
func taskRequests(r *http.Request, body []byte) bool {
	return r.Method == http.MethodPost && strings.HasPrefix(methodOf(body), "tasks/")
}

// anyOf is true when one of ps is.
func anyOf(ps ...func(*http.Request, []byte) bool) func(*http.Request, []byte) bool {
	return func(r *http.Request, body []byte) bool {
		for _, p := range ps {
			if p(r, body) {
				return true
			}
		}
		return false
	}
}

// envelope is what route reads of a JSON-RPC message.
type envelope struct {
	Method *string         `json:"method"`
	Result json.RawMessage `json:"result"`
	Error  json.RawMessage `json:"error"`
}

// isResponse reports whether body is one JSON-RPC response.
func isResponse(body []byte) bool {
	var e envelope
	return json.Unmarshal(body, &e) == nil && e.Method == nil && (e.Result != nil || e.Error != nil)
}

// methodOf returns the method of the JSON-RPC message body, "" if none.
func methodOf(body []byte) string {
	var e envelope
	if json.Unmarshal(body, &e) != nil || e.Method == nil {
		return ""
	}
	return *e.Method
}
