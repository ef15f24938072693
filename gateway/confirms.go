package gateway

import (
	"encoding/json"
	"errors"
	"sync/atomic"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/gateway/internal/upstream"
)

// ConfirmMode says who answers an upstream's own confirmation during a
// call of one of its tools: a form-mode elicitation/create the upstream
// sends (a URL-mode elicitation, sampling and roots are relayed to the
// client in every mode).
type ConfirmMode int

const (
	// ConfirmsRelay, the default: the question goes to the client, as
	// any other, and its answer goes back upstream.
	ConfirmsRelay ConfirmMode = iota
	// ConfirmsDecline: the gateway declines it ({"action":"decline"});
	// the client is never asked.
	ConfirmsDecline
	// ConfirmsApproval: the gateway answers it from the call's approval,
	// never from the client (which may be the agent itself): when a
	// person approved the call on the approval page (BeforeCall decided
	// mcphandler.Approve; ToolCall.ApprovedBy), the upstream's first
	// yes/no question of the call — a form whose schema has one property,
	// a boolean — is accepted with it true. Any other form, a second
	// question, or a call that no person approved is declined. Pair it
	// with a BeforeCall that decides Approve for the upstream's tools.
	ConfirmsApproval
)

// String names the mode as examples/gateway's "confirms" does.
func (m ConfirmMode) String() string {
	switch m {
	case ConfirmsRelay:
		return "relay"
	case ConfirmsDecline:
		return "decline"
	case ConfirmsApproval:
		return "approval"
	}
	return "invalid"
}

// The gateway's own answers to an upstream's confirmation.
var (
	declineAnswer = json.RawMessage(`{"action":"decline"}`)
)

// confirmer answers the upstream's confirmations of one call as its
// mode says. It is safe for concurrent use.
type confirmer struct {
	mode ConfirmMode
	call *mcphandler.ToolCall
	used atomic.Bool // the call's approval answered a question already
}

// own reports whether the gateway answers the upstream's question
// (method, params) itself rather than the client.
func (c *confirmer) own(method string, params json.RawMessage) bool {
	return c != nil && c.mode != ConfirmsRelay && method == "elicitation/create" && !urlMode(params)
}

// answer returns the gateway's own answer to the upstream's question
// (method, params), or false when the question goes to the client.
func (c *confirmer) answer(method string, params json.RawMessage) (json.RawMessage, bool) {
	if !c.own(method, params) {
		return nil, false
	}
	if c.mode != ConfirmsApproval {
		return declineAnswer, true
	}
	prop, ok := yesNo(params)
	if _, approved := c.call.ApprovedBy(); !ok || !approved || !c.used.CompareAndSwap(false, true) {
		return declineAnswer, true
	}
	content, _ := json.Marshal(map[string]bool{prop: true})
	return append(append(json.RawMessage(`{"action":"accept","content":`), content...), '}'), true
}

// yesNo returns the one boolean property of a form elicitation's
// requestedSchema: the name of its yes or no, when that is all it asks.
func yesNo(params json.RawMessage) (string, bool) {
	var p struct {
		RequestedSchema struct {
			Properties map[string]struct {
				Type string `json:"type"`
			} `json:"properties"`
		} `json:"requestedSchema"`
	}
	if json.Unmarshal(params, &p) != nil || len(p.RequestedSchema.Properties) != 1 {
		return "", false
	}
	for name, prop := range p.RequestedSchema.Properties {
		return name, prop.Type == "boolean"
	}
	return "", false
}

// round answers an upstream's input_required round of a call relayed to a
// 2026-07-28 client (rounds.go) when every question of it is one the
// gateway answers itself: the inputResponses to retry with. false when
// none is (the round goes to the client); an error when some are and
// some are not, which the gateway cannot split between itself and the
// client.
func (c *confirmer) round(ir *upstream.InputRequired) (json.RawMessage, bool, error) {
	n := 0
	for _, r := range ir.Requests {
		if c.own(r.Method, r.Params) {
			n++
		}
	}
	switch {
	case n == 0:
		return nil, false, nil
	case n < len(ir.Requests):
		return nil, false, errMixedRound
	}
	var out []byte
	for _, r := range ir.Requests {
		res, _ := c.answer(r.Method, r.Params)
		out = appendMember(out, r.Key, res)
	}
	return append(out, '}'), true, nil
}

// errMixedRound is the cause of a relayed call whose upstream asked, in
// one round, a confirmation the gateway answers itself with questions for
// the client.
var errMixedRound = errors.New("gateway: an upstream round mixes a confirmation the gateway answers with questions for the client")
