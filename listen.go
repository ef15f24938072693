package mcphandler

import (
	"encoding/json"
	"slices"
	"strconv"
	"time"

	"github.com/mcphandler/mcphandler/internal/jsonrpc"
)

// listenFilter is the notifications filter of subscriptions/listen.
type listenFilter struct {
	ToolsListChanged      bool     `json:"toolsListChanged,omitempty"`
	PromptsListChanged    bool     `json:"promptsListChanged,omitempty"`
	ResourcesListChanged  bool     `json:"resourcesListChanged,omitempty"`
	ResourceSubscriptions []string `json:"resourceSubscriptions,omitempty"`
}

// listen serves subscriptions/listen (2026-07-28): an SSE stream that
// starts with the acknowledgement of what the server agreed to deliver,
// then carries the matching change notifications published by the Notify
// methods on any replica, each tagged with the subscription id (the
// request's id). It ends when the client closes it.
//
// See https://modelcontextprotocol.io/specification/2026-07-28/basic/patterns/subscriptions.
func (h *Handler) listen(rq *request, m *jsonrpc.Message) {
	var p struct {
		Notifications *listenFilter `json:"notifications"`
	}
	if json.Unmarshal(m.Params, &p) != nil || p.Notifications == nil {
		rq.fail(m.ID, invalidParams("Invalid params: notifications is required"))
		return
	}
	want, agreed := p.Notifications, listenFilter{}
	if len(want.ResourceSubscriptions) > h.cfg.MaxSubscriptions {
		rq.fail(m.ID, invalidParams("Invalid params: a listen filter names at most "+strconv.Itoa(h.cfg.MaxSubscriptions)+" resourceSubscriptions"))
		return
	}
	for _, uri := range want.ResourceSubscriptions {
		if e := h.checkSubscriptionURI(uri); e != nil {
			rq.fail(m.ID, e)
			return
		}
	}
	agreed.ToolsListChanged = want.ToolsListChanged && h.cfg.ListTools != nil
	agreed.PromptsListChanged = want.PromptsListChanged && h.cfg.ListPrompts != nil
	agreed.ResourcesListChanged = want.ResourcesListChanged && h.hasResources()
	// One call of each list hook resolves the whole filter.
	rr := resourceResolver{h: h, ctx: rq.ctx, id: rq.id}
	for _, uri := range want.ResourceSubscriptions {
		if h.cfg.ReadResource == nil {
			break
		}
		if _, ok, err := rr.find(uri); err == nil && ok {
			agreed.ResourceSubscriptions = append(agreed.ResourceSubscriptions, uri)
		}
	}
	sub, err := h.cfg.Store.Subscribe(rq.ctx, notifyChannel)
	if err != nil {
		h.storeFailed(rq, m, err)
		return
	}
	defer sub.Close()

	tag := append([]byte(`"_meta":{"`+metaSubscriptionID+`":`), m.ID...)
	tag = append(tag, '}')
	ack, _ := json.Marshal(struct {
		Notifications listenFilter `json:"notifications"`
	}{agreed})
	ack = append(ack[:len(ack)-1], ',')
	ack = append(append(ack, tag...), '}')
	if rq.st.send(jsonrpc.AppendRequest(nil, nil, "notifications/subscriptions/acknowledged", ack)) != nil {
		return
	}
	tick := time.NewTicker(h.cfg.KeepAlive)
	defer tick.Stop()
	// The stream lives while its caller stays who it was (see callerContext).
	ctx, cancel := h.callerContext(rq.r, rq.id)
	defer cancel()
	done := ctx.Done()
	for {
		select {
		case <-done:
			return
		case <-tick.C:
			if rq.st.comment() != nil {
				return
			}
		case b, ok := <-sub.C():
			if !ok {
				return
			}
			c, ok := h.openChange(b)
			if !ok || !c.Target.matches(rq.id) {
				continue
			}
			params := append([]byte{'{'}, tag...)
			switch c.Method {
			case "notifications/tools/list_changed":
				ok = agreed.ToolsListChanged
			case "notifications/prompts/list_changed":
				ok = agreed.PromptsListChanged
			case "notifications/resources/list_changed":
				ok = agreed.ResourcesListChanged
			case "notifications/resources/updated":
				ok = slices.Contains(agreed.ResourceSubscriptions, c.URI)
				params = append(append(append([]byte(`{"uri":`), jsonrpc.AppendString(nil, c.URI)...), ','), tag...)
			default:
				ok = false
			}
			if ok && rq.st.send(jsonrpc.AppendRequest(nil, nil, c.Method, append(params, '}'))) != nil {
				return
			}
		}
	}
}
