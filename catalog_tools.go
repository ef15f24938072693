package mcphandler

import (
	"context"

	"github.com/mcphandler/mcphandler/internal/jsonrpc"
)

// visibleTools returns the caller's tools that the handler can serve
// (tooldefs.go) with role gates applied. The host's slice is never
// modified.
func (c *catalog) visibleTools(ctx context.Context, id Identity) ([]Tool, error) {
	tools, err := c.cfg.ListTools(ctx)
	if err != nil {
		return nil, err
	}
	tools = c.servableTools(ctx, tools)
	return gate(c, tools, id, func(t *Tool) gates { return gates{t.MinRole, t.Scopes} }), nil
}

// findTool returns the caller's tool called name, or false when it does not
// exist for this caller (whatever the reason: a definition the handler
// cannot serve does not exist).
func (c *catalog) findTool(ctx context.Context, id Identity, name string) (Tool, bool, error) {
	setLookup(ctx, name) // ToolLookupFrom
	tools, err := c.cfg.ListTools(ctx)
	setLookup(ctx, "")
	if err != nil {
		return Tool{}, false, err
	}
	t, ok := c.servableTool(ctx, tools, name)
	return t, ok && c.visible(gates{t.MinRole, t.Scopes}, id), nil
}

func (c *catalog) listTools(rq *request, m *jsonrpc.Message) {
	rq.info.beginList() // AddListMeta adds to this result while ListTools runs
	tools, err := c.visibleTools(rq.ctx, rq.id)
	rq.info.endList()
	if err != nil {
		c.cfg.Logger.Error("mcphandler: ListTools", "err", err)
		rq.fail(m.ID, wireError(err))
		return
	}
	tools = rq.offeredTools(tools)
	lo, hi, next, perr := c.page(m.Params, len(tools))
	if perr != nil {
		rq.fail(m.ID, perr)
		return
	}
	b := rq.openResult(make([]byte, 0, 64+len(m.ID)+256*(hi-lo)+len(rq.listMeta())), m.ID)
	b = append(b, `"tools":[`...)
	for i := lo; i < hi; i++ {
		if i > lo {
			b = append(b, ',')
		}
		if b, err = tools[i].appendJSON(b); err != nil {
			c.cfg.Logger.Error("mcphandler: encoding tool", "tool", tools[i].Name, "err", err)
			rq.fail(m.ID, errInternal())
			return
		}
		b = appendExecution(rq, &tools[i], b)
		b = appendToolUI(rq, &tools[i], b)
	}
	b = append(b, ']')
	if next != "" {
		b = append(b, `,"nextCursor":`...)
		b = jsonrpc.AppendString(b, next)
	}
	rq.st.finish(closeResult(b))
}
