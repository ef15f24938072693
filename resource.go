package mcphandler

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"

	"github.com/mcphandler/mcphandler/internal/jsonrpc"
)

// Resource is a concrete resource the caller may list and read.
//
// See https://modelcontextprotocol.io/specification/2025-11-25/server/resources.
type Resource struct {
	URI         string       `json:"uri"`
	Name        string       `json:"name"`
	Title       string       `json:"title,omitempty"`
	Description string       `json:"description,omitempty"`
	MimeType    string       `json:"mimeType,omitempty"`
	Size        int64        `json:"size,omitempty"`
	Annotations *Annotations `json:"annotations,omitempty"`
	Icons       []Icon       `json:"icons,omitempty"`
	// MinRole is the least role that may see and read the resource.
	MinRole string `json:"-"`
	// Scopes are the OAuth scopes a caller's token needs to read it.
	Scopes []string `json:"-"`
}

// ResourceTemplate describes a family of resources by an RFC 6570 (level 1)
// URI template such as "docs://{id}". A URI that matches a template the
// caller may see can be read, unless it is the URI of a concrete resource:
// a concrete resource the caller may not see shadows every template, so
// its URI reads as not found for that caller.
type ResourceTemplate struct {
	URITemplate string       `json:"uriTemplate"`
	Name        string       `json:"name"`
	Title       string       `json:"title,omitempty"`
	Description string       `json:"description,omitempty"`
	MimeType    string       `json:"mimeType,omitempty"`
	Annotations *Annotations `json:"annotations,omitempty"`
	Icons       []Icon       `json:"icons,omitempty"`
	// MinRole is the least role that may see and read the template's
	// resources.
	MinRole string `json:"-"`
	// Scopes are the OAuth scopes a caller's token needs to read them.
	Scopes []string `json:"-"`
}

// ListResourcesFunc returns the concrete resources the caller in ctx may
// see. Role gates are applied by the handler.
type ListResourcesFunc func(ctx context.Context) ([]Resource, error)

// ListResourceTemplatesFunc returns the resource templates the caller in
// ctx may see. Role gates are applied by the handler.
type ListResourceTemplatesFunc func(ctx context.Context) ([]ResourceTemplate, error)

// ReadResourceFunc returns the contents of the resource in req. It is only
// called for a URI the caller may see: one of its resources, or one that
// matches one of its templates and is not the URI of a concrete resource
// hidden from the caller. Return [ErrResourceNotFound] when the
// resource does not exist after all.
type ReadResourceFunc func(ctx context.Context, req *ResourceRequest) ([]ResourceContents, error)

// ErrResourceNotFound, returned (wrapped) by a ReadResourceFunc, answers
// "resource not found": -32002 on the 2025 revisions.
var ErrResourceNotFound = errors.New("mcphandler: resource not found")

// ResourceRequest is one resources/read.
type ResourceRequest struct {
	// URI is the URI being read.
	URI string
	// Resource is the matching concrete resource, or nil.
	Resource *Resource
	// Template is the matching template when no concrete resource
	// matched, and Params holds its placeholder values.
	Template *ResourceTemplate
	Params   map[string]string
	Identity Identity
	*Exchange
}

func (r *ResourceRequest) scopes() []string {
	if r.Resource != nil {
		return r.Resource.Scopes
	}
	return r.Template.Scopes
}

// matchTemplate reports whether uri matches the RFC 6570 level-1 template
// tmpl and returns the placeholder values. A placeholder matches one or
// more characters up to the literal text that follows it; a value never
// contains "/" unless the placeholder ends the template.
func matchTemplate(tmpl, uri string) (map[string]string, bool) {
	var vars map[string]string
	for {
		open := strings.IndexByte(tmpl, '{')
		if open < 0 {
			return vars, tmpl == uri
		}
		if !strings.HasPrefix(uri, tmpl[:open]) {
			return nil, false
		}
		uri = uri[open:]
		end := strings.IndexByte(tmpl[open:], '}')
		if end < 0 {
			return nil, false
		}
		name := tmpl[open+1 : open+end]
		tmpl = tmpl[open+end+1:]
		val, rest, ok := matchValue(tmpl, uri)
		if !ok {
			return nil, false
		}
		uri = rest
		if vars == nil {
			vars = make(map[string]string, 2)
		}
		vars[name] = val
	}
}

// matchValue takes the value of a placeholder from the start of uri: up
// to the literal text that follows the placeholder in tmpl (the rest of
// the template after it), or all of uri if the placeholder ends tmpl. It
// returns the value and the rest of uri.
func matchValue(tmpl, uri string) (val, rest string, ok bool) {
	lit := tmpl
	if i := strings.IndexByte(lit, '{'); i >= 0 {
		lit = lit[:i]
	}
	switch {
	case lit == "" && tmpl == "":
		val, rest = uri, ""
	case lit == "":
		return "", "", false // adjacent placeholders are ambiguous
	default:
		i := strings.Index(uri, lit)
		if i < 0 {
			return "", "", false
		}
		val, rest = uri[:i], uri[i:]
	}
	if val == "" || (tmpl != "" && strings.Contains(val, "/")) {
		return "", "", false
	}
	return val, rest, true
}

func (c *catalog) hasResources() bool {
	return c.cfg.ListResources != nil || c.cfg.ListResourceTemplates != nil || c.cfg.ListSkills != nil
}

func (c *catalog) visibleResources(ctx context.Context, id Identity) ([]Resource, error) {
	if c.cfg.ListResources == nil {
		return nil, nil
	}
	rs, err := c.cfg.ListResources(ctx)
	if err != nil {
		return nil, err
	}
	return gate(c, rs, id, func(r *Resource) gates { return gates{r.MinRole, r.Scopes} }), nil
}

func (c *catalog) visibleTemplates(ctx context.Context, id Identity) ([]ResourceTemplate, error) {
	if c.cfg.ListResourceTemplates == nil {
		return nil, nil
	}
	ts, err := c.cfg.ListResourceTemplates(ctx)
	if err != nil {
		return nil, err
	}
	return gate(c, ts, id, func(t *ResourceTemplate) gates { return gates{t.MinRole, t.Scopes} }), nil
}

// findResource resolves uri among what the caller may see; see
// resourceResolver.
func (c *catalog) findResource(ctx context.Context, id Identity, uri string) (*ResourceRequest, bool, error) {
	rr := resourceResolver{c: c, ctx: ctx, id: id}
	return rr.find(uri)
}

// resourceResolver resolves resource URIs for one caller, calling each list
// hook at most once however many URIs it resolves.
//
// A URI names a concrete resource of the host's list first: if the caller
// may see it, that is the resource; if not, the URI does not exist for the
// caller — a concrete resource the caller cannot see shadows every template
// its URI matches. Only a URI that no concrete resource claims is matched
// against the templates the caller may see, the first match winning.
type resourceResolver struct {
	c   *catalog
	ctx context.Context
	id  Identity

	rs, ts       bool // the lists below were loaded
	resources    []Resource
	templates    []ResourceTemplate
	resourcesErr error
	templatesErr error
}

func (rr *resourceResolver) find(uri string) (*ResourceRequest, bool, error) {
	c := rr.c
	if !rr.rs {
		rr.rs = true
		if c.cfg.ListResources != nil {
			rr.resources, rr.resourcesErr = c.cfg.ListResources(rr.ctx)
		}
	}
	if rr.resourcesErr != nil {
		return nil, false, rr.resourcesErr
	}
	shadowed := false
	for i := range rr.resources {
		r := &rr.resources[i]
		if r.URI != uri {
			continue
		}
		if c.visible(gates{r.MinRole, r.Scopes}, rr.id) {
			return &ResourceRequest{URI: uri, Resource: r, Identity: rr.id}, true, nil
		}
		shadowed = true
	}
	if shadowed {
		return nil, false, nil
	}
	if !rr.ts {
		rr.ts = true
		rr.templates, rr.templatesErr = c.visibleTemplates(rr.ctx, rr.id)
	}
	if rr.templatesErr != nil {
		return nil, false, rr.templatesErr
	}
	for i := range rr.templates {
		if vars, ok := matchTemplate(rr.templates[i].URITemplate, uri); ok {
			return &ResourceRequest{URI: uri, Template: &rr.templates[i], Params: vars, Identity: rr.id}, true, nil
		}
	}
	return nil, false, nil
}

// errResourceNotFound is the one answer for a resource that does not exist
// or that the caller may not see.
func errResourceNotFound(uri string) *jsonrpc.Error {
	data, _ := json.Marshal(map[string]string{"uri": uri})
	return rpcErrorData(CodeResourceNotFound, "Resource not found", data)
}

// resourceNotFound is errResourceNotFound in the request's revision:
// 2026-07-28 reports it as -32602.
func (rq *request) resourceNotFound(uri string) *jsonrpc.Error {
	e := errResourceNotFound(uri)
	e.Code = int(rq.era.codeResourceNotFound())
	return e
}

// uriParams decodes the params of resources/read, subscribe and
// unsubscribe; it answers the request and returns false when the uri is
// missing.
func (rq *request) uriParams(m *jsonrpc.Message) (uriParams, bool) {
	var p uriParams
	err := json.Unmarshal(m.Params, &p)
	rq.ic.target(p.URI) // for Config.Interceptors (intercept.go)
	if err != nil || p.URI == "" {
		rq.fail(m.ID, invalidParams("Invalid params: uri is required"))
		return p, false
	}
	return p, true
}

type uriParams struct {
	URI string `json:"uri"`
}

func (c *catalog) listResources(rq *request, m *jsonrpc.Message) {
	rs, err := c.visibleResources(rq.ctx, rq.id)
	if err != nil {
		rq.hookFailed(m, "ListResources", err)
		return
	}
	sk, err := c.skillResources(rq.ctx, rq.id)
	if err != nil {
		rq.hookFailed(m, "ListSkills", err)
		return
	}
	// Clipped: the skills never go into spare room of the host's slice.
	rs = append(slices.Clip(rq.offeredResources(rs)), sk...)
	listPage(c, rq, m, "resources", rs)
}

func (c *catalog) listTemplates(rq *request, m *jsonrpc.Message) {
	ts, err := c.visibleTemplates(rq.ctx, rq.id)
	if err != nil {
		rq.hookFailed(m, "ListResourceTemplates", err)
		return
	}
	listPage(c, rq, m, "resourceTemplates", ts)
}

func (c *catalog) readResource(rq *request, m *jsonrpc.Message) {
	p, ok := rq.uriParams(m)
	if !ok || c.readSkillFile(rq, m, p.URI) {
		return
	}
	req, ok, err := c.findResource(rq.ctx, rq.id, p.URI)
	if err != nil {
		rq.hookFailed(m, "ListResources", err)
		return
	}
	if !ok || c.cfg.ReadResource == nil {
		rq.fail(m.ID, rq.resourceNotFound(p.URI))
		return
	}
	need := req.scopes()
	if c.stepUp(rq, m, need) {
		return
	}
	req.Exchange = rq.exchange(m)
	if !rq.prepareRounds(req.Exchange, m, p.URI, nil) {
		return
	}
	contents, err := c.cfg.ReadResource(rq.ctx, req)
	switch {
	case rq.finishRounds(req.Exchange, m, err):
		return
	case errors.Is(err, ErrResourceNotFound):
		rq.fail(m.ID, rq.resourceNotFound(p.URI))
		return
	case err != nil:
		rq.hookFailed(m, "ReadResource", err)
		return
	}
	rq.replyContents(m, contents)
}

// replyContents answers resources/read with contents.
func (rq *request) replyContents(m *jsonrpc.Message, contents []ResourceContents) {
	if contents == nil {
		contents = []ResourceContents{}
	}
	appContents(contents)
	b, err := json.Marshal(map[string]any{"contents": contents})
	if err != nil {
		rq.hookFailed(m, "encoding resource", err)
		return
	}
	rq.reply(m.ID, b)
}

// subscribe records a resources/subscribe (or unsubscribe) in the session.
// Only a resource the caller may read can be subscribed to, with a URI of
// at most Config.Limits.MaxSubscriptionURIBytes, and a session holds at most
// Config.Limits.MaxSubscriptions.
func (c *catalog) subscribe(rq *request, m *jsonrpc.Message, on bool) {
	p, ok := rq.uriParams(m)
	if !ok {
		return
	}
	if on && !c.mayWatch(rq, m, p.URI) {
		return
	}
	if rq.sess != nil {
		subs := rq.sess.Subscriptions
		i := indexOf(subs, p.URI)
		switch {
		case on && i < 0:
			rq.sess.Subscriptions = append(subs, p.URI)
		case !on && i >= 0:
			rq.sess.Subscriptions = append(subs[:i:i], subs[i+1:]...)
		default:
			rq.reply(m.ID, emptyResult)
			return
		}
		if err := c.cfg.Store.Update(rq.ctx, rq.sess); err != nil {
			rq.storeFailed(m, err)
			return
		}
	}
	rq.reply(m.ID, emptyResult)
}

// mayWatch checks a resources/subscribe of uri: bounded, within the
// session's limit, and a resource the caller sees (a hidden one answers
// like an unknown one). It answers the request and returns false if not.
func (c *catalog) mayWatch(rq *request, m *jsonrpc.Message, uri string) bool {
	if e := c.checkSubscriptionURI(uri); e != nil {
		rq.fail(m.ID, e)
		return false
	}
	if rq.sess != nil && len(rq.sess.Subscriptions) >= c.cfg.Limits.MaxSubscriptions && indexOf(rq.sess.Subscriptions, uri) < 0 {
		rq.fail(m.ID, invalidParams("Invalid params: a session holds at most "+strconv.Itoa(c.cfg.Limits.MaxSubscriptions)+" resource subscriptions"))
		return false
	}
	if _, ok, err := c.findResource(rq.ctx, rq.id, uri); err != nil {
		rq.hookFailed(m, "ListResources", err)
		return false
	} else if !ok {
		rq.fail(m.ID, rq.resourceNotFound(uri))
		return false
	}
	return true
}

// checkSubscriptionURI refuses a URI to subscribe to that is longer than
// Config.Limits.MaxSubscriptionURIBytes.
func (c *catalog) checkSubscriptionURI(uri string) *jsonrpc.Error {
	if len(uri) > c.cfg.Limits.MaxSubscriptionURIBytes {
		return invalidParams("Invalid params: a subscribed uri has at most " + strconv.Itoa(c.cfg.Limits.MaxSubscriptionURIBytes) + " bytes")
	}
	return nil
}

func indexOf(list []string, s string) int {
	for i, v := range list {
		if v == s {
			return i
		}
	}
	return -1
}
