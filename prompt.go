package mcphandler

import (
	"context"
	"encoding/json"
	"strconv"

	"github.com/mcphandler/mcphandler/internal/jsonrpc"
)

// Prompt is a prompt template the caller may list and get.
//
// See https://modelcontextprotocol.io/specification/2025-11-25/server/prompts.
type Prompt struct {
	Name        string           `json:"name"`
	Title       string           `json:"title,omitempty"`
	Description string           `json:"description,omitempty"`
	Arguments   []PromptArgument `json:"arguments,omitempty"`
	Icons       []Icon           `json:"icons,omitempty"`
	// MinRole is the least role that may see and get the prompt.
	MinRole string `json:"-"`
	// Scopes are the OAuth scopes a caller's token needs to get it.
	Scopes []string `json:"-"`
}

// PromptArgument is one argument of a prompt. Required arguments are
// enforced by the handler before GetPrompt runs.
type PromptArgument struct {
	Name        string `json:"name"`
	Title       string `json:"title,omitempty"`
	Description string `json:"description,omitempty"`
	Required    bool   `json:"required,omitempty"`
}

// ListPromptsFunc returns the prompts the caller in ctx may see. Role gates
// are applied by the handler.
type ListPromptsFunc func(ctx context.Context) ([]Prompt, error)

// GetPromptFunc renders the prompt in req. It is only called for a prompt
// the caller may see, with every required argument present.
type GetPromptFunc func(ctx context.Context, req *PromptRequest) (*PromptResult, error)

// PromptRequest is one prompts/get.
type PromptRequest struct {
	Prompt    Prompt
	Arguments map[string]string
	Identity  Identity
	*Exchange
}

// PromptResult is the rendered prompt.
type PromptResult struct {
	Description string
	Messages    []PromptMessage
}

// PromptMessage is one message of a rendered prompt; Role is "user" or
// "assistant".
type PromptMessage struct {
	Role    string
	Content Content
}

func (r *PromptResult) appendJSON(dst []byte) ([]byte, error) {
	dst = append(dst, '{')
	if r.Description != "" {
		dst = append(dst, `"description":`...)
		dst = jsonrpc.AppendString(dst, r.Description)
		dst = append(dst, ',')
	}
	dst = append(dst, `"messages":[`...)
	for i := range r.Messages {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"role":`...)
		dst = jsonrpc.AppendString(dst, r.Messages[i].Role)
		dst = append(dst, `,"content":`...)
		var err error
		if dst, err = r.Messages[i].Content.appendJSON(dst); err != nil {
			return nil, err
		}
		dst = append(dst, '}')
	}
	return append(dst, "]}"...), nil
}

func (c *catalog) visiblePrompts(ctx context.Context, id Identity) ([]Prompt, error) {
	ps, err := c.cfg.ListPrompts(ctx)
	if err != nil {
		return nil, err
	}
	return gate(c, ps, id, func(p *Prompt) gates { return gates{p.MinRole, p.Scopes} }), nil
}

func (c *catalog) findPrompt(ctx context.Context, id Identity, name string) (*Prompt, error) {
	ps, err := c.visiblePrompts(ctx, id)
	if err != nil {
		return nil, err
	}
	for i := range ps {
		if ps[i].Name == name {
			return &ps[i], nil
		}
	}
	return nil, nil
}

// errUnknownPrompt is the one answer for a prompt that does not exist or
// that the caller may not see.
func errUnknownPrompt(name string) *jsonrpc.Error {
	return rpcError(CodeInvalidParams, "Unknown prompt: "+quoteEcho(name))
}

func (c *catalog) listPrompts(rq *request, m *jsonrpc.Message) {
	ps, err := c.visiblePrompts(rq.ctx, rq.id)
	if err != nil {
		rq.hookFailed(m, "ListPrompts", err)
		return
	}
	listPage(c, rq, m, "prompts", ps)
}

func (c *catalog) getPrompt(rq *request, m *jsonrpc.Message) {
	prompt, p, ok := c.promptToGet(rq, m)
	if !ok {
		return
	}
	x := rq.exchange(m)
	args, _ := json.Marshal(p.Arguments)
	if !rq.prepareRounds(x, m, p.Name, args) {
		return
	}
	res, err := c.cfg.GetPrompt(rq.ctx, &PromptRequest{Prompt: *prompt, Arguments: p.Arguments, Identity: rq.id, Exchange: x})
	if rq.finishRounds(x, m, err) {
		return
	}
	if err != nil {
		rq.hookFailed(m, "GetPrompt", err)
		return
	}
	if res == nil {
		res = &PromptResult{}
	}
	b, err := res.appendJSON(make([]byte, 0, 256))
	if err != nil {
		rq.hookFailed(m, "encoding prompt", err)
		return
	}
	rq.reply(m.ID, b)
}

// promptToGet decodes the params of prompts/get and finds the caller's
// prompt; it answers the request and returns false when the prompt is
// unknown, needs a scope the token lacks, or misses a required argument.
func (c *catalog) promptToGet(rq *request, m *jsonrpc.Message) (*Prompt, getPromptParams, bool) {
	var p getPromptParams
	err := json.Unmarshal(m.Params, &p)
	rq.ic.target(p.Name) // for Config.Interceptors (intercept.go)
	if err != nil || p.Name == "" {
		msg := "Invalid params: a prompt name is required"
		if err != nil {
			msg = "Invalid params: " + jsonError(err)
		}
		rq.fail(m.ID, invalidParams(msg))
		return nil, p, false
	}
	prompt, err := c.findPrompt(rq.ctx, rq.id, p.Name)
	if err != nil {
		rq.hookFailed(m, "ListPrompts", err)
		return nil, p, false
	}
	if prompt == nil || c.cfg.GetPrompt == nil {
		rq.fail(m.ID, errUnknownPrompt(p.Name))
		return nil, p, false
	}
	rq.ic.found() // for Config.Interceptors (intercept.go)
	if c.stepUp(rq, m, prompt.Scopes) {
		return nil, p, false
	}
	for _, a := range prompt.Arguments {
		if _, ok := p.Arguments[a.Name]; a.Required && !ok {
			rq.fail(m.ID, invalidParams("Invalid params: missing required argument "+strconv.Quote(a.Name)))
			return nil, p, false
		}
	}
	if p.Arguments == nil {
		p.Arguments = map[string]string{}
	}
	return prompt, p, true
}

type getPromptParams struct {
	Name      string            `json:"name"`
	Arguments map[string]string `json:"arguments"`
}

// CompleteFunc suggests values for an argument of a prompt or a resource
// template the caller may see, and whose scopes the caller's token holds
// (without them the request answers 403 insufficient_scope, as prompts/get
// and resources/read do).
type CompleteFunc func(ctx context.Context, req *CompleteRequest) (*CompleteResult, error)

// CompleteRequest is one completion/complete.
type CompleteRequest struct {
	// Prompt is set for a "ref/prompt" reference, Template for a
	// "ref/resource" one.
	Prompt   *Prompt
	Template *ResourceTemplate
	// Argument is the argument being completed and its partial Value.
	Argument, Value string
	// Context holds the values of arguments already filled in.
	Context  map[string]string
	Identity Identity
}

// CompleteResult lists suggestions; at most 100 are sent.
type CompleteResult struct {
	Values  []string
	Total   int
	HasMore bool
}

// completeParams are the params of completion/complete.
type completeParams struct {
	Ref struct {
		Type string `json:"type"`
		Name string `json:"name"`
		URI  string `json:"uri"`
	} `json:"ref"`
	Argument struct {
		Name  string `json:"name"`
		Value string `json:"value"`
	} `json:"argument"`
	Context struct {
		Arguments map[string]string `json:"arguments"`
	} `json:"context"`
}

func (c *catalog) complete(rq *request, m *jsonrpc.Message) {
	var p completeParams
	if err := json.Unmarshal(m.Params, &p); err != nil || p.Argument.Name == "" {
		rq.fail(m.ID, invalidParams("Invalid params: ref and argument are required"))
		return
	}
	req := &CompleteRequest{Argument: p.Argument.Name, Value: p.Argument.Value, Context: p.Context.Arguments, Identity: rq.id}
	if !c.completeRef(rq, m, &p, req) {
		return
	}
	// Completing an argument uses the prompt or template: it needs the
	// same scopes as getting or reading it.
	var need []string
	if req.Prompt != nil {
		need = req.Prompt.Scopes
	} else {
		need = req.Template.Scopes
	}
	if c.stepUp(rq, m, need) {
		return
	}
	res, err := c.cfg.Complete(rq.ctx, req)
	if err != nil {
		rq.hookFailed(m, "Complete", err)
		return
	}
	rq.reply(m.ID, completionJSON(res))
}

// completeRef resolves the prompt or resource template p refers to, among
// the caller's, into req. It answers the request and returns false when
// there is none.
func (c *catalog) completeRef(rq *request, m *jsonrpc.Message, p *completeParams, req *CompleteRequest) bool {
	switch p.Ref.Type {
	case "ref/prompt":
		if c.cfg.ListPrompts == nil {
			rq.fail(m.ID, errUnknownPrompt(p.Ref.Name))
			return false
		}
		prompt, err := c.findPrompt(rq.ctx, rq.id, p.Ref.Name)
		if err != nil {
			rq.hookFailed(m, "ListPrompts", err)
			return false
		}
		if prompt == nil {
			rq.fail(m.ID, errUnknownPrompt(p.Ref.Name))
			return false
		}
		req.Prompt = prompt
	case "ref/resource":
		ts, err := c.visibleTemplates(rq.ctx, rq.id)
		if err != nil {
			rq.hookFailed(m, "ListResourceTemplates", err)
			return false
		}
		for i := range ts {
			if ts[i].URITemplate == p.Ref.URI {
				req.Template = &ts[i]
				break
			}
		}
		if req.Template == nil {
			rq.fail(m.ID, invalidParams("Invalid params: unknown resource template"))
			return false
		}
	default:
		rq.fail(m.ID, invalidParams("Invalid params: ref.type must be ref/prompt or ref/resource"))
		return false
	}
	return true
}

// completionJSON is the result of completion/complete: at most 100 values.
func completionJSON(res *CompleteResult) []byte {
	if res == nil {
		res = &CompleteResult{}
	}
	values := res.Values
	if len(values) > 100 {
		values, res.HasMore = values[:100], true
	}
	if values == nil {
		values = []string{}
	}
	out := struct {
		Completion struct {
			Values  []string `json:"values"`
			Total   int      `json:"total,omitempty"`
			HasMore bool     `json:"hasMore,omitempty"`
		} `json:"completion"`
	}{}
	out.Completion.Values, out.Completion.Total, out.Completion.HasMore = values, res.Total, res.HasMore
	b, _ := json.Marshal(out)
	return b
}
