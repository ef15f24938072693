package mcphandler

import (
	"context"
	"encoding/json"

	"github.com/mcphandler/mcphandler/internal/jsonrpc"
)

// Target selects the sessions a change notification is for. Its zero value
// selects every session; a non-empty field must match the session's
// identity. A Target is data, not a function, because it travels to every
// replica that holds a matching stream.
type Target struct {
	Tenant  string `json:"t,omitempty"`
	Subject string `json:"s,omitempty"`
}

// Everyone returns the Target of every session. (A function, so that no
// package can reassign what every other one means by it.)
func Everyone() Target { return Target{} }

// TenantOf targets the sessions of one tenant.
func TenantOf(tenant string) Target { return Target{Tenant: tenant} }

func (t Target) matches(id Identity) bool {
	return (t.Tenant == "" || t.Tenant == id.Tenant) && (t.Subject == "" || t.Subject == id.Subject)
}

type change struct {
	Method string `json:"m"`
	URI    string `json:"u,omitempty"`
	Target
}

// NotifyToolsChanged tells the targeted sessions that their tool list
// changed (notifications/tools/list_changed), on their open GET streams, on
// every replica that shares the store. Sessions without an open stream miss
// it, as the spec allows.
func (h *Handler) NotifyToolsChanged(ctx context.Context, t Target) error {
	return h.bus.publishChange(ctx, change{Method: "notifications/tools/list_changed", Target: t})
}

// NotifyResourcesChanged tells the targeted sessions that their resource
// list changed (notifications/resources/list_changed).
func (h *Handler) NotifyResourcesChanged(ctx context.Context, t Target) error {
	return h.bus.publishChange(ctx, change{Method: "notifications/resources/list_changed", Target: t})
}

// NotifyPromptsChanged tells the targeted sessions that their prompt list
// changed (notifications/prompts/list_changed).
func (h *Handler) NotifyPromptsChanged(ctx context.Context, t Target) error {
	return h.bus.publishChange(ctx, change{Method: "notifications/prompts/list_changed", Target: t})
}

// NotifyResourceUpdated tells the targeted sessions that subscribed to uri
// (resources/subscribe) that it changed (notifications/resources/updated).
func (h *Handler) NotifyResourceUpdated(ctx context.Context, uri string, t Target) error {
	return h.bus.publishChange(ctx, change{Method: "notifications/resources/updated", URI: uri, Target: t})
}

// publishChange publishes c, signed for the notify channel, to every
// replica's streams.
func (rb *replicaBus) publishChange(ctx context.Context, c change) error {
	b, err := json.Marshal(c)
	if err != nil {
		return err
	}
	_, err = rb.publish(ctx, rb.macs.notify, notifyChannel, b)
	return err
}

// openChange verifies and decodes a message of the notify channel. One that
// does not verify, is older than messageWindow or does not decode is
// dropped: nothing outside the replicas can notify a session.
func (rb *replicaBus) openChange(b []byte) (change, bool) {
	var c change
	p, ok := rb.openMessage(rb.macs.notify, notifyChannel, b)
	if !ok || json.Unmarshal(p, &c) != nil {
		return change{}, false
	}
	return c, true
}

// changeMessage returns the notification a stream of id's session should
// send for the published change c (verified and decoded by the Handler's
// changeHub), or nil if it is not for that session. subscribed reports
// whether the session subscribed to a URI.
func changeMessage(c *change, id Identity, subscribed func(uri string) bool) []byte {
	if !c.Target.matches(id) {
		return nil
	}
	if c.Method != "notifications/resources/updated" {
		return jsonrpc.AppendRequest(nil, nil, c.Method, nil)
	}
	if !subscribed(c.URI) {
		return nil
	}
	p := append([]byte(`{"uri":`), jsonrpc.AppendString(nil, c.URI)...)
	return jsonrpc.AppendRequest(nil, nil, c.Method, append(p, '}'))
}
