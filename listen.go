package mcphandler

import (
	"encoding/json"
	"slices"
	"strconv"

	"github.com/mcphandler/mcphandler/internal/jsonrpc"
)

// listenFilter is the notifications filter of subscriptions/listen.
type listenFilter struct {
	ToolsListChanged      bool     `json:"toolsListChanged,omitempty"`
	PromptsListChanged    bool     `json:"promptsListChanged,omitempty"`
	ResourcesListChanged  bool     `json:"resourcesListChanged,omitempty"`
	ResourceSubscriptions []string `json:"resourceSubscriptions,omitempty"`
	// TaskIDs are the caller's tasks whose changes it receives as
	// notifications/tasks (the tasks extension; see tasks_listen.go).
	TaskIDs []string `json:"taskIds,omitempty"`
}

// listen serves subscriptions/listen (2026-07-28): an SSE stream that
// starts with the acknowledgement of what the server agreed to deliver,
// then carries the matching change notifications published by the Notify
// methods on any replica, each tagged with the subscription id (the
// request's id). It ends when the client closes it.
//
// See https://modelcontextprotocol.io/specification/2026-07-28/basic/patterns/subscriptions.
func (ss *streams) listen(rq *request, m *jsonrpc.Message) {
	h := rq.h // the tasks' feed, and how a store failure is answered
	agreed, e := ss.listenFilter(rq, m.Params)
	if e != nil {
		rq.fail(m.ID, e)
		return
	}
	w, err := ss.watchChanges(rq.ctx, rq.id)
	if err != nil {
		rq.storeFailed(m, err)
		return
	}
	defer ss.unwatchChanges(w)
	feed, err := h.tasks.feed(rq, agreed.TaskIDs, m.ID)
	if err != nil {
		rq.storeFailed(m, err)
		return
	}
	defer feed.stop()

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
	// The stream lives while its caller stays who it was (see callerCheck).
	ss.runStream(rq.context(), &streamLoop{
		caller:    ss.checkCaller(rq.r, rq.id),
		keepAlive: func() bool { return rq.st.comment() == nil },
		msgs:      feed.c,
		onMsg:     func(b []byte) bool { return rq.st.send(b) == nil },
		changes:   w.c,
		onChange: func(c *change) bool {
			msg := agreed.message(rq.id, tag, c)
			return msg == nil || rq.st.send(msg) == nil
		},
	})
}

// listenFilter reads and bounds the filter of subscriptions/listen and
// returns what the server agrees to deliver: the lists it serves, and the
// resources among those named that the caller can read. One call of each
// list hook resolves the whole filter.
func (ss *streams) listenFilter(rq *request, params json.RawMessage) (listenFilter, *jsonrpc.Error) {
	h := rq.h // the catalog and the tasks, which agree to what the filter names
	var p struct {
		Notifications *listenFilter `json:"notifications"`
	}
	if json.Unmarshal(params, &p) != nil || p.Notifications == nil {
		return listenFilter{}, invalidParams("Invalid params: notifications is required")
	}
	want, agreed := p.Notifications, listenFilter{}
	if len(want.ResourceSubscriptions) > h.cfg.Limits.MaxSubscriptions {
		return listenFilter{}, invalidParams("Invalid params: a listen filter names at most " + strconv.Itoa(h.cfg.Limits.MaxSubscriptions) + " resourceSubscriptions")
	}
	for _, uri := range want.ResourceSubscriptions {
		if e := h.catalog.checkSubscriptionURI(uri); e != nil {
			return listenFilter{}, e
		}
	}
	agreed.ToolsListChanged = want.ToolsListChanged && h.cfg.ListTools != nil
	agreed.PromptsListChanged = want.PromptsListChanged && h.cfg.ListPrompts != nil
	agreed.ResourcesListChanged = want.ResourcesListChanged && h.catalog.hasResources()
	var e *jsonrpc.Error
	if agreed.TaskIDs, e = h.tasks.agree(rq, want.TaskIDs); e != nil {
		return listenFilter{}, e
	}
	rr := resourceResolver{c: h.catalog, ctx: rq.ctx, id: rq.id}
	for _, uri := range want.ResourceSubscriptions {
		if h.cfg.ReadResource == nil {
			break
		}
		if _, ok, err := rr.find(uri); err == nil && ok {
			agreed.ResourceSubscriptions = append(agreed.ResourceSubscriptions, uri)
		}
	}
	return agreed, nil
}

// message returns the notification, tagged with the subscription's tag,
// that a listen stream of id with filter f sends for the published change
// c; nil if it is not for it.
func (f *listenFilter) message(id Identity, tag []byte, c *change) []byte {
	if !c.Target.matches(id) {
		return nil
	}
	ok := false
	params := append([]byte{'{'}, tag...)
	switch c.Method {
	case "notifications/tools/list_changed":
		ok = f.ToolsListChanged
	case "notifications/prompts/list_changed":
		ok = f.PromptsListChanged
	case "notifications/resources/list_changed":
		ok = f.ResourcesListChanged
	case "notifications/resources/updated":
		ok = slices.Contains(f.ResourceSubscriptions, c.URI)
		params = append(append(append([]byte(`{"uri":`), jsonrpc.AppendString(nil, c.URI)...), ','), tag...)
	default:
		ok = false
	}
	if !ok {
		return nil
	}
	return jsonrpc.AppendRequest(nil, nil, c.Method, append(params, '}'))
}
