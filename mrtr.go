package mcphandler

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"time"

	"github.com/mcphandler/mcphandler/elicitation"
	"github.com/mcphandler/mcphandler/internal/jsonrpc"
	"github.com/mcphandler/mcphandler/internal/seal"
)

// ErrInputRequired is returned, on 2026-07-28 requests, by the [Exchange]
// methods that ask the client something whose answer is not there yet.
// Return it (or an error wrapping it) from the handler: the request is
// answered with resultType "input_required", the questions asked so far and
// a sealed requestState; when the client retries with the answers, the
// handler runs again from the start and the same questions, asked in the
// same order, return their answers.
//
// See https://modelcontextprotocol.io/specification/2026-07-28/basic/patterns/mrtr.
var ErrInputRequired = errors.New("mcphandler: input required from the client")

// MissingCapabilityError reports a question the client cannot be asked
// because it did not declare the capability. It matches [ErrCannotAsk]. A
// handler that returns it on a 2026-07-28 request is answered with -32021
// naming the capability.
type MissingCapabilityError struct {
	// Capability is the ClientCapabilities object that is missing, e.g.
	// {"elicitation":{"form":{}}}.
	Capability json.RawMessage
}

func (e *MissingCapabilityError) Error() string {
	return "mcphandler: the client cannot be asked: it did not declare " + string(e.Capability)
}

func (e *MissingCapabilityError) Is(target error) bool { return target == ErrCannotAsk }

func missingCap(capJSON string) error {
	return &MissingCapabilityError{Capability: json.RawMessage(capJSON)}
}

// inputRequest is one entry of an InputRequiredResult's inputRequests.
type inputRequest struct {
	Method string          `json:"method"`
	Params json.RawMessage `json:"params,omitempty"`
}

// statePayload is what a requestState carries, sealed: the keys asked in
// the round it answers, the answers of earlier rounds, and the nonce of a
// pending confirm.
type statePayload struct {
	Asked []string                   `json:"a,omitempty"`
	Prior map[string]json.RawMessage `json:"p,omitempty"`
	Nonce string                     `json:"n,omitempty"`
}

// rounds is the multi round-trip state of one 2026-07-28 request.
type rounds struct {
	binding   seal.Binding
	responses map[string]json.RawMessage // inputResponses of this retry
	state     statePayload               // opened requestState (zero if none)
	pending   map[string]inputRequest    // questions asked this round
	order     []string                   // pending keys in asking order
	n         int                        // questions asked so far, for keys
}

// errBadState is the one answer for a requestState that does not open:
// tampered, expired, sealed for another caller, tool or arguments.
var errBadState = &jsonrpc.Error{Code: CodeInvalidParams, Message: "Invalid or expired requestState"}

// newRounds opens the request's requestState (if any) bound to the caller,
// method, name and arguments.
func (rq *request) newRounds(params json.RawMessage, name string, args []byte) (*rounds, *jsonrpc.Error) {
	var p struct {
		InputResponses map[string]json.RawMessage `json:"inputResponses"`
		RequestState   *string                    `json:"requestState"`
	}
	if len(params) > 0 && json.Unmarshal(params, &p) != nil {
		return nil, invalidParams("Invalid params: malformed inputResponses")
	}
	digest, err := seal.Digest(args)
	if err != nil {
		// e.g. duplicate keys: a state must never be bindable to
		// arguments that have no single meaning.
		return nil, invalidParams("Invalid params: arguments must be valid JSON without duplicate keys")
	}
	r := &rounds{
		binding:   seal.Binding{Subject: rq.id.Subject, Tenant: rq.id.Tenant, Method: rq.method, Name: name, ArgsDigest: digest},
		responses: p.InputResponses,
	}
	rq.retry = p.RequestState != nil || p.InputResponses != nil
	if p.RequestState != nil {
		payload, err := rq.h.keys.Open(*p.RequestState, r.binding, time.Now())
		if err != nil || json.Unmarshal(payload, &r.state) != nil {
			return nil, errBadState
		}
	}
	if r.state.Prior == nil {
		r.state.Prior = map[string]json.RawMessage{}
	}
	return r, nil
}

// ask returns the answer to the question key, from an earlier round or
// from this retry's inputResponses (only for a key the state says was
// asked), or records it for this round and returns ErrInputRequired.
func (r *rounds) ask(key, method string, params []byte) (json.RawMessage, error) {
	if a, ok := r.state.Prior[key]; ok {
		return a, nil
	}
	if a, ok := r.responses[key]; ok && slices.Contains(r.state.Asked, key) {
		r.state.Prior[key] = a
		return a, nil
	}
	if r.pending == nil {
		r.pending = make(map[string]inputRequest, 2)
	}
	if _, dup := r.pending[key]; !dup {
		r.order = append(r.order, key)
	}
	r.pending[key] = inputRequest{Method: method, Params: params}
	return nil, ErrInputRequired
}

// nextKey names the next question: its kind and its position, so that the
// same handler asking the same questions in the same order finds the same
// keys on the retry.
func (r *rounds) nextKey(kind string) string {
	r.n++
	return kind + "-" + strconv.Itoa(r.n)
}

// inputRequired answers the request with the questions of this round and
// a sealed state that carries the answers gathered so far.
func (rq *request) inputRequired(id json.RawMessage, r *rounds) {
	st := statePayload{Asked: r.order, Prior: r.state.Prior, Nonce: r.state.Nonce}
	payload, _ := json.Marshal(st)
	token, err := rq.h.keys.Seal(r.binding, payload, time.Now().Add(rq.h.cfg.ConfirmTimeout))
	if err != nil {
		rq.fail(id, &jsonrpc.Error{Code: CodeInternalError, Message: "Internal error"})
		return
	}
	reqs := make(map[string]inputRequest, len(r.pending))
	for k, v := range r.pending {
		reqs[k] = v
	}
	b, _ := json.Marshal(reqs)
	out := make([]byte, 0, 128+len(b)+len(token))
	out = append(out, `{"jsonrpc":"2.0","id":`...)
	out = append(out, id...)
	out = append(out, `,"result":{"resultType":"input_required","inputRequests":`...)
	out = append(out, b...)
	out = append(out, `,"requestState":`...)
	out = jsonrpc.AppendString(out, token)
	rq.st.finish(append(out, "}}"...))
}

// Input is one question of [Exchange.Ask]: exactly one field is set.
type Input struct {
	Elicit        *ElicitRequest
	CreateMessage any // the params of a sampling/createMessage
	ListRoots     bool
}

// Answer is the answer to one [Input], in the same field.
type Answer struct {
	Elicit        elicitation.Result
	CreateMessage json.RawMessage
	Roots         []Root
}

// Ask asks the client several questions at once and returns the answers in
// order. On a 2025 session they are sent one after another on the
// request's stream; on 2026-07-28 they all go out in one input_required
// round (and Ask returns [ErrInputRequired] until the client answers all).
func (x *Exchange) Ask(ctx context.Context, inputs ...Input) ([]Answer, error) {
	answers := make([]Answer, len(inputs))
	var pending bool
	for i, in := range inputs {
		var err error
		switch {
		case in.Elicit != nil:
			answers[i].Elicit, err = x.Elicit(ctx, *in.Elicit)
		case in.CreateMessage != nil:
			answers[i].CreateMessage, err = x.CreateMessage(ctx, in.CreateMessage)
		case in.ListRoots:
			answers[i].Roots, err = x.ListRoots(ctx)
		default:
			err = errors.New("mcphandler: Ask: an Input with no question")
		}
		if errors.Is(err, ErrInputRequired) && x.mr != nil {
			pending = true // keep asking: all questions go in this round
			continue
		}
		if err != nil {
			return nil, err
		}
	}
	if pending {
		return nil, ErrInputRequired
	}
	return answers, nil
}

// prepareRounds opens the multi round-trip state of a 2026-07-28 request
// that may ask the client (tools/call, prompts/get, resources/read). It
// answers the request and returns false when the state does not open.
func (rq *request) prepareRounds(x *Exchange, m *jsonrpc.Message, name string, args []byte) bool {
	if !rq.modern {
		return true
	}
	r, e := rq.newRounds(m.Params, name, args)
	if e != nil {
		rq.fail(m.ID, e)
		return false
	}
	x.mr = r
	return true
}

// finishRounds answers input_required when the handler asked something not
// answered yet, or -32021 when it needed a capability the client lacks,
// and reports whether it answered.
func (rq *request) finishRounds(x *Exchange, m *jsonrpc.Message, err error) bool {
	if x == nil || x.mr == nil {
		return false
	}
	if len(x.mr.pending) > 0 {
		rq.inputRequired(m.ID, x.mr)
		return true
	}
	var mce *MissingCapabilityError
	if errors.As(err, &mce) {
		data := append([]byte(`{"requiredCapabilities":`), mce.Capability...)
		rq.fail(m.ID, &jsonrpc.Error{Code: CodeMissingClientCapability, Message: "Missing required client capability", Data: append(data, '}')})
		return true
	}
	return false
}
