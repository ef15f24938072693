package mcphandler

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"
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
// the round it answers, the answers of earlier rounds, and for a call that
// needs a confirm, the confirm's nonce and the round of the confirm this
// state answers (1: the confirm's own question; then one per round the
// confirmed tool asked the client more). Hold is what the tool's handler
// carried into the round (Exchange.SetRoundState); Held says the call's
// rounds are single use from the first round that carried some: Nonce
// names their record, as a confirmed call's (see heldRound).
type statePayload struct {
	Asked []string                   `json:"a,omitempty"`
	Prior map[string]json.RawMessage `json:"p,omitempty"`
	Nonce string                     `json:"n,omitempty"`
	Round int                        `json:"r,omitempty"`
	Hold  []byte                     `json:"h,omitempty"`
	Held  bool                       `json:"hd,omitempty"`
}

// rounds is the multi round-trip state of one 2026-07-28 request.
type rounds struct {
	binding   seal.Binding // ArgsDigest is set by bind, when first needed
	args      []byte       // the arguments the state is bound to
	bound     bool
	responses map[string]json.RawMessage // inputResponses of this retry
	state     statePayload               // opened requestState (zero if none)
	pending   map[string]inputRequest    // questions asked this round
	order     []string                   // pending keys in asking order
	n         int                        // questions asked so far, for keys
	hasState  bool                       // the request carried a requestState
	hold      []byte                     // SetRoundState's, for the next round
}

// ReservedKeyPrefix starts the input keys the handler uses for its own
// questions (a confirm's): they live apart from a tool's questions. A
// tool's [ElicitRequest.Key] or [Input.Key] that starts with it is refused
// with an error, on every revision.
const ReservedKeyPrefix = "mcphandler/"

// confirmInputKey is the input key of a confirm's question.
const confirmInputKey = ReservedKeyPrefix + "confirm"

// reservedKeyError reports a tool's question under a reserved key.
type reservedKeyError struct{ key string }

func (e *reservedKeyError) Error() string {
	return "mcphandler: input key " + strconv.Quote(e.key) + " starts with the reserved prefix " + strconv.Quote(ReservedKeyPrefix)
}

// errBadState is the one answer for a requestState that does not open:
// tampered, expired, sealed for another caller, tool or arguments.
var errBadState = rpcError(CodeInvalidParams, "Invalid or expired requestState")

// newRounds opens the request's requestState (if any) bound to the caller,
// method, name and arguments.
func (rq *request) newRounds(params json.RawMessage, name string, args []byte) (*rounds, *jsonrpc.Error) {
	var p struct {
		InputResponses map[string]json.RawMessage `json:"inputResponses"`
		RequestState   *string                    `json:"requestState"`
	}
	// A first round carries neither member: nothing more to read.
	if containsKey(params, `"inputResponses"`) || containsKey(params, `"requestState"`) {
		if json.Unmarshal(params, &p) != nil {
			return nil, invalidParams("Invalid params: malformed inputResponses")
		}
	}
	r := &rounds{
		binding:   seal.Binding{Subject: rq.id.Subject, Tenant: rq.id.Tenant, Method: rq.method, Name: name},
		args:      args,
		responses: p.InputResponses,
	}
	rq.retry = p.RequestState != nil || p.InputResponses != nil
	if p.RequestState != nil {
		r.hasState = true
		b, err := r.bind()
		if err != nil {
			return nil, invalidParams("Invalid params: arguments must be valid JSON without repeated keys")
		}
		payload, err := rq.h.keys.Open(*p.RequestState, b, time.Now())
		if err != nil || json.Unmarshal(payload, &r.state) != nil {
			return nil, errBadState
		}
	}
	if r.state.Prior == nil {
		r.state.Prior = map[string]json.RawMessage{}
	}
	return r, nil
}

// bind returns the binding of the request's state, computing the digest
// of its arguments the first time: only a request that opens or seals a
// state needs it. Arguments with no single meaning (a repeated key) have
// no digest, so no state can be bound to them.
func (r *rounds) bind() (seal.Binding, error) {
	if !r.bound {
		d, err := seal.Digest(r.args)
		if err != nil {
			return seal.Binding{}, err
		}
		r.binding.ArgsDigest, r.bound = d, true
	}
	return r.binding, nil
}

// ask returns the answer to the question key, from an earlier round or
// from this retry's inputResponses (only for a key the state says was
// asked), or records it for this round and returns ErrInputRequired.
func (r *rounds) ask(key, method string, params []byte) (json.RawMessage, error) {
	if a, ok := r.state.Prior[key]; ok {
		return a, nil
	}
	// An answer counts for a question the sealed state says was asked. A
	// request without any state may answer a tool's questions up front
	// (the client could answer them anyway). A confirm's answer never
	// comes through here (see confirmAnswer).
	if a, ok := r.responses[key]; ok && !strings.HasPrefix(key, ReservedKeyPrefix) && (slices.Contains(r.state.Asked, key) || !r.hasState) {
		if !validInput(method, a) {
			return nil, &badInputError{key: key}
		}
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

// confirmAnswer returns this retry's answer to the confirm's question,
// if the sealed state says the confirm was asked in the round it answers.
func (r *rounds) confirmAnswer() (json.RawMessage, bool) {
	a, ok := r.responses[confirmInputKey]
	return a, ok && slices.Contains(r.state.Asked, confirmInputKey)
}

// askConfirm puts the confirm's question in this round.
func (r *rounds) askConfirm(params []byte) {
	if r.pending == nil {
		r.pending = make(map[string]inputRequest, 1)
	}
	if _, dup := r.pending[confirmInputKey]; !dup {
		r.order = append(r.order, confirmInputKey)
	}
	r.pending[confirmInputKey] = inputRequest{Method: "elicitation/create", Params: params}
}

// badInputError reports an inputResponses entry that is not a result of
// the kind asked; the request is answered -32602.
type badInputError struct{ key string }

func (e *badInputError) Error() string {
	return "mcphandler: malformed input response " + strconv.Quote(e.key)
}

// validInput checks the shape of an answer to a question of method.
func validInput(method string, a json.RawMessage) bool {
	var v map[string]json.RawMessage
	if json.Unmarshal(a, &v) != nil || v == nil {
		return false
	}
	switch method {
	case "elicitation/create":
		_, err := elicitation.ParseResult(a)
		return err == nil
	case "sampling/createMessage":
		return len(v["content"]) > 0 && len(v["role"]) > 0
	case "roots/list":
		var r struct {
			Roots []Root `json:"roots"`
		}
		return json.Unmarshal(a, &r) == nil && r.Roots != nil
	}
	return true
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
	members, err := rq.inputRequiredMembers(r)
	if err != nil {
		rq.fail(id, errInternal())
		return
	}
	rq.sendInputRequired(id, members)
}

// inputRequiredMembers returns the members of this round's input_required
// result that a confirmed call records for replays: the questions and the
// sealed state.
func (rq *request) inputRequiredMembers(r *rounds) ([]byte, error) {
	st := statePayload{Asked: r.order, Prior: r.state.Prior, Nonce: r.state.Nonce, Round: r.state.Round,
		Hold: r.hold, Held: r.state.Held || r.hold != nil}
	payload, _ := json.Marshal(st)
	binding, err := r.bind()
	if err != nil {
		return nil, err
	}
	token, err := rq.h.keys.Seal(binding, payload, time.Now().Add(rq.h.cfg.ConfirmTimeout))
	if err != nil {
		return nil, err
	}
	b, _ := json.Marshal(r.pending)
	out := make([]byte, 0, 40+len(b)+len(token))
	out = append(out, `"inputRequests":`...)
	out = append(out, b...)
	out = append(out, `,"requestState":`...)
	return jsonrpc.AppendString(out, token), nil
}

// sendInputRequired answers with an input_required result of members.
func (rq *request) sendInputRequired(id json.RawMessage, members []byte) {
	out := make([]byte, 0, 128+len(members))
	out = append(out, `{"jsonrpc":"2.0","id":`...)
	out = append(out, id...)
	out = append(out, `,"result":{"resultType":"input_required","_meta":{"`+metaServerInfo+`":`...)
	out = append(out, rq.h.caps.serverInfoJSON(rq)...)
	out = append(out, "},"...)
	out = append(out, members...)
	rq.st.finish(append(out, "}}"...))
}

// Input is one question of [Exchange.Ask]: exactly one of Elicit,
// CreateMessage, ListRoots and Request is set.
type Input struct {
	// Key names the question in a 2026-07-28 input_required round; if
	// empty, one is picked from its position. Keys starting with
	// [ReservedKeyPrefix] are refused, as for [ElicitRequest.Key].
	Key           string
	Elicit        *ElicitRequest
	CreateMessage any // the params of a sampling/createMessage
	ListRoots     bool
	// Request is a request another MCP server made during this call,
	// asked as [Exchange.Request] asks it: its method and params as that
	// server sent them, checked the same way. Its answer is
	// [Answer.Result].
	Request *ServerRequest
}

// ServerRequest is a request a server makes of its client —
// elicitation/create, sampling/createMessage or roots/list — with its
// params (a JSON object, or empty) as that server sent them.
type ServerRequest struct {
	Method string
	Params json.RawMessage
}

// Answer is the answer to one [Input], in the same field.
type Answer struct {
	Elicit        elicitation.Result
	CreateMessage json.RawMessage
	Roots         []Root
	// Result is the client's result to a Request, as the client sent it.
	Result json.RawMessage
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
			req := *in.Elicit
			if req.Key == "" {
				req.Key = in.Key
			}
			answers[i].Elicit, err = x.Elicit(ctx, req)
		case in.CreateMessage != nil:
			answers[i].CreateMessage, err = x.createMessage(ctx, in.Key, in.CreateMessage)
		case in.ListRoots:
			answers[i].Roots, err = x.listRoots(ctx, in.Key)
		case in.Request != nil:
			answers[i].Result, err = x.relay(ctx, in.Key, in.Request.Method, in.Request.Params)
		default:
			err = errors.New("mcphandler: Ask: an Input with no question")
		}
		if errors.Is(err, ErrInputRequired) && x.inRounds() {
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

// openRounds opens the multi round-trip state of a 2026-07-28 request
// that may ask the client (tools/call, prompts/get, resources/read). It
// answers the request and returns false when the state does not open.
func (rq *request) openRounds(x *Exchange, m *jsonrpc.Message, name string, args []byte) bool {
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
	var bad *badInputError
	if errors.As(err, &bad) {
		rq.fail(m.ID, invalidParams("Invalid params: inputResponses["+quoteEcho(bad.key)+"] is not a valid answer"))
		return true
	}
	var mce *MissingCapabilityError
	if errors.As(err, &mce) {
		data := append([]byte(`{"requiredCapabilities":`), mce.Capability...)
		rq.fail(m.ID, rpcErrorData(CodeMissingClientCapability, "Missing required client capability", append(data, '}')))
		return true
	}
	return false
}

// inRounds reports whether x's questions go in input_required rounds
// (2026-07-28) rather than as server-to-client requests.
func (x *Exchange) inRounds() bool { return x != nil && x.mr != nil }

// askRound puts a question into the request's rounds under key (or the
// next key of kind).
func (x *Exchange) askRound(key, kind, method string, params []byte) (json.RawMessage, error) {
	if key == "" {
		key = x.mr.nextKey(kind)
	}
	return x.mr.ask(key, method, params)
}

// MaxRoundState is the most bytes [Exchange.SetRoundState] carries to the
// next round. The round's requestState, which the client sends back within
// Config.Limits.MaxBodyBytes, grows by about 1.8 bytes per byte carried
// (base64 inside the sealed payload, and again around it).
const MaxRoundState = 64 << 10

// SetRoundState carries b (at most [MaxRoundState] bytes, copied) to the
// retry that answers the input_required round this call ends with, where
// [Exchange.RoundState] returns it: a handler that is not to run its work
// again on the retry — a gateway that relays another server's round —
// keeps there what it needs to go on from where it stopped. It is for
// 2026-07-28 rounds only ([Exchange.AnswersByRetry]): elsewhere it returns
// an error and carries nothing. Each call replaces what an earlier one set;
// nothing is carried when the call ends without input_required, nor past
// the round: a later round carries only what its own run sets.
//
// b is sealed in the round's requestState with the rest of the round
// (AES-256-GCM under Config.StateKeys), so the client can neither read nor
// change it, and is bound as the whole state is: to the caller (subject
// and tenant), the method, the tool's name and a digest of the canonical
// arguments, for ConfirmTimeout from when the round was asked. It makes
// the call's rounds single use, across replicas, as a confirmed call's
// are: the first round that carries state records the call in the store
// (a nonce/<n> record, counted against the caller's
// Config.Limits.MaxConfirmsPerIdentity), and only the first retry of each
// round's requestState runs the handler again. A retry of a round already
// answered runs nothing: it gets the result the call ended with, or the
// next round's input_required answer, or a refusal (an older round, or
// while the call runs).
func (x *Exchange) SetRoundState(b []byte) error {
	if !x.inRounds() {
		return errors.New("mcphandler: SetRoundState: the client does not answer this call by retrying it")
	}
	if len(b) > MaxRoundState {
		return errors.New("mcphandler: SetRoundState: more than " + strconv.Itoa(MaxRoundState) + " bytes")
	}
	x.mr.hold = append(make([]byte, 0, len(b)+1), b...) // never nil: carried even when empty
	return nil
}

// RoundState returns what [Exchange.SetRoundState] carried into the round
// this request answers, as it was set; nil on a first round, when the
// previous round's run set nothing (or nothing but an empty b), and
// outside 2026-07-28 rounds. It was
// sealed, so it is what this handler set for this caller, tool and
// arguments — never the client's bytes — but not necessarily for the same
// configuration: check what it names still holds.
func (x *Exchange) RoundState() []byte {
	if !x.inRounds() {
		return nil
	}
	return x.mr.state.Hold
}

// InputResponse returns the client's answer under key on a 2026-07-28
// retry, as the client sent it (one JSON value, not checked further):
// the answer to a question asked under key in the round this retry
// answers (its sealed state says which were asked), or one carried from
// an earlier round. It asks nothing, so a handler that relays another
// server's questions ([Input.Request]) reads their answers with it and
// asks the next round's under new keys. It returns false for a key not
// answered, a key of [ReservedKeyPrefix] (the handler's own questions),
// and outside 2026-07-28 rounds.
func (x *Exchange) InputResponse(key string) (json.RawMessage, bool) {
	if !x.inRounds() || strings.HasPrefix(key, ReservedKeyPrefix) {
		return nil, false
	}
	r := x.mr
	if a, ok := r.state.Prior[key]; ok {
		return a, true
	}
	if a, ok := r.responses[key]; ok && (slices.Contains(r.state.Asked, key) || !r.hasState) {
		return a, true
	}
	return nil, false
}

// holds reports whether the call's handler carried state into its next
// round, whose input_required answer is to make the rounds single use.
func (x *Exchange) holds() bool {
	return x.inRounds() && x.mr.hold != nil && len(x.mr.pending) > 0
}
