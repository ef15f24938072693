package gateway

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/gateway/internal/upstream"
	"github.com/mcphandler/mcphandler/internal/canon"
	"github.com/mcphandler/mcphandler/internal/jsonrpc"
	"github.com/mcphandler/mcphandler/session"
)

// A 2026-07-28 client answers questions by retrying its call. When the
// upstream speaks 2026-07-28 too, its question is a round of its own — an
// input_required answer with its requestState — that the gateway relays
// instead of running anything twice:
//
//   - the call goes upstream (CallToolRound) and comes back input_required;
//   - the client is asked the upstream's input requests, each under the key
//     relayKey(round, its key) (never the handler's own keys, such as the
//     confirm's), and the round's requestState is the core's sealed one,
//     carrying a relayState (Exchange.SetRoundState): the upstream's
//     requestState and keys, the round, and a digest of the upstream's id
//     and URL and of the tool's name there. The core binds it to the
//     caller, the tool served and the arguments, with an expiry, and makes
//     the rounds single use (a nonce record per call: only the first retry
//     of a round's state runs);
//   - the retry is checked against the upstream it is forwarded to now and
//     goes upstream with the client's answers under the upstream's keys
//     and its requestState echoed byte for byte; up to maxRelayRounds
//     rounds.

// Bounds on a relayed round. The relayState stays under
// mcphandler.MaxRoundState: 34 + 3 + 48 KiB + 1 + 64 × (2 + 128) bytes.
const (
	// maxRelayRounds is how many input_required rounds of an upstream one
	// call relays; the next one ends the call.
	maxRelayRounds = 8
	// maxRelayedState bounds the upstream's requestState (as sent, a JSON
	// string) that a round carries.
	maxRelayedState = 48 << 10
	// maxRelayedKey bounds each input key of the upstream's; the wire
	// client allows at most 64 requests per round.
	maxRelayedKey  = 128
	maxRelayedKeys = 64
)

// relayKey is the key the client is asked an upstream's input request
// under, in round: apart from the handler's own keys
// (mcphandler.ReservedKeyPrefix) and from the upstream's keys of other
// rounds, which it may use again.
func relayKey(round int, key string) string {
	return "upstream/" + strconv.Itoa(round) + "/" + key
}

// relayState is what one relayed round carries to its retry, sealed by the
// core.
type relayState struct {
	round int      // this round: 1..maxRelayRounds
	bind  [32]byte // relayBinding of the upstream and tool it was asked for
	state []byte   // the upstream's requestState, a JSON string as sent; nil: none
	keys  []string // the upstream's input keys asked, in order
}

const relayVersion = 1

// relayBinding is the digest that binds a round to the upstream (its id
// and URL) and the tool's name there.
func relayBinding(id, url, name string) [32]byte {
	b := []byte("mcphandler/gateway/relay/v1\x00")
	for _, s := range [...]string{id, url, name} {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	return sha256.Sum256(b)
}

// encode is s as bytes: a version, the round, the binding, then the
// state and each key, length-prefixed (uvarint).
func (s *relayState) encode() []byte {
	b := make([]byte, 0, 2+len(s.bind)+binary.MaxVarintLen64+len(s.state)+16*len(s.keys))
	b = append(b, relayVersion, byte(s.round))
	b = append(b, s.bind[:]...)
	b = binary.AppendUvarint(b, uint64(len(s.state)))
	b = append(b, s.state...)
	b = binary.AppendUvarint(b, uint64(len(s.keys)))
	for _, k := range s.keys {
		b = binary.AppendUvarint(b, uint64(len(k)))
		b = append(b, k...)
	}
	return b
}

var errBadRelayState = errors.New("gateway: a relayed round's state that does not decode")

// decodeRelayState reads what encode wrote, and only that: every length
// within its bound, nothing left over. Its input was sealed by the core,
// so only this gateway's bytes reach it; it is strict all the same.
func decodeRelayState(b []byte) (relayState, error) {
	var s relayState
	if len(b) < 2+len(s.bind) || b[0] != relayVersion || b[1] < 1 || b[1] > maxRelayRounds {
		return s, errBadRelayState
	}
	s.round = int(b[1])
	copy(s.bind[:], b[2:])
	b = b[2+len(s.bind):]
	field := func(max int) ([]byte, bool) {
		n, w := uvarint(b)
		if w <= 0 || n > uint64(max) || n > uint64(len(b)-w) {
			return nil, false
		}
		f := b[w : w+int(n)]
		b = b[w+int(n):]
		return f, true
	}
	st, ok := field(maxRelayedState)
	if !ok {
		return s, errBadRelayState
	}
	if len(st) > 0 {
		s.state = st
	}
	n, w := uvarint(b)
	if w <= 0 || n < 1 || n > maxRelayedKeys {
		return s, errBadRelayState
	}
	b = b[w:]
	s.keys = make([]string, 0, n)
	for range n {
		k, ok := field(maxRelayedKey)
		if !ok {
			return s, errBadRelayState
		}
		s.keys = append(s.keys, string(k))
	}
	if len(b) != 0 {
		return s, errBadRelayState
	}
	return s, nil
}

// uvarint is binary.Uvarint for the shortest encoding only, so that each
// state has one encoding; w <= 0 for anything else.
func uvarint(b []byte) (n uint64, w int) {
	n, w = binary.Uvarint(b)
	if w > 1 && b[w-1] == 0 {
		return 0, -1 // a last byte of zero: a longer encoding than needed
	}
	return n, w
}

// errRelayMoved is the cause of a retry whose round was relayed for
// another upstream, URL or tool than the one it would go to now.
var errRelayMoved = errors.New("gateway: a relayed round's state retried for another upstream")

// relay runs a call of a 2026-07-28 upstream for a 2026-07-28 client that
// answers by retrying: the upstream's rounds are relayed to the client
// (see the comment at the top of this file). On a retry, the round's
// state must name this upstream, URL and tool, else nothing is sent. ep
// is how the caller reaches the upstream now (forward.endpoint).
func (f *forward) relay(ctx context.Context, call *mcphandler.ToolCall, ep upstream.Endpoint, a *asker) (*mcphandler.ToolResult, error) {
	x := call.Exchange
	bind := relayBinding(f.upstream, ep.URL, f.name)
	var st relayState
	retry := &upstream.Retry{}
	if b := x.RoundState(); b != nil {
		var err error
		st, err = decodeRelayState(b)
		if err == nil && subtle.ConstantTimeCompare(st.bind[:], bind[:]) != 1 {
			err = errRelayMoved
		}
		if err != nil {
			f.g.cfg.Logger.Warn("gateway: a relayed round not forwarded", "upstream", f.upstream, "tool", clip(f.name), "err", err)
			return nil, &mcphandler.ToolError{Class: mcphandler.ClassInternal, Err: err,
				Detail: "not forwarded to upstream " + f.upstream + ": this requestState was issued for another upstream or tool; call again without it"}
		}
		retry.State, retry.Responses = st.state, st.answers(x)
	}
	for own := 0; ; {
		raw, ir, err := f.callTool(ctx, call, ep, a, retry) // telemetry.go
		if err != nil {
			return nil, f.failed(ctx, err)
		}
		if ir == nil {
			return f.result(raw)
		}
		// A round of confirmations the gateway answers itself
		// (Upstream.Confirms) goes back upstream at once.
		mine, ok, err := a.confirms.round(ir)
		if err != nil {
			f.g.cfg.Logger.Warn("gateway: an upstream's round not relayed", "upstream", f.upstream, "tool", clip(f.name), "err", err)
			return nil, &mcphandler.ToolError{Class: mcphandler.ClassInternal, Err: err, Detail: "upstream " + f.upstream +
				" asked for a confirmation, which this gateway answers itself, together with questions for the client, in one round"}
		}
		if ok {
			if own++; own > maxRelayRounds {
				return nil, &mcphandler.ToolError{Class: mcphandler.ClassInternal, Err: upstream.ErrTooMany,
					Detail: "upstream " + f.upstream + " asked for confirmation more than " + strconv.Itoa(maxRelayRounds) + " times in one call"}
			}
			retry = &upstream.Retry{State: ir.State, Responses: mine}
			continue
		}
		next, inputs, err := f.nextRound(st.round+1, bind, ir, x.ClientCapabilities())
		if err != nil {
			return nil, err
		}
		// The state goes first: should the client lack what one question
		// needs, the round that goes out is held all the same.
		if err := x.SetRoundState(next.encode()); err != nil {
			return nil, &mcphandler.ToolError{Class: mcphandler.ClassInternal, Err: err}
		}
		answers, err := x.Ask(ctx, inputs...)
		if err != nil {
			return nil, err // mcphandler.ErrInputRequired: the round goes to the client
		}
		// Answered already (a first request that answered up front): on
		// to the upstream at once.
		st, retry = next, &upstream.Retry{State: ir.State, Responses: upstreamAnswers(ir.Requests, answers)}
	}
}

// nextRound is the relayState and the questions of the upstream's round
// ir, relayed as round: refused past maxRelayRounds, with a requestState
// over maxRelayedState or a key over maxRelayedKey, or with a URL
// elicitation the client did not declare it answers (which the upstream
// was told).
func (f *forward) nextRound(round int, bind [32]byte, ir *upstream.InputRequired, caps session.Capabilities) (relayState, []mcphandler.Input, error) {
	refuse := func(err error, detail string) (relayState, []mcphandler.Input, error) {
		f.g.cfg.Logger.Warn("gateway: an upstream's round not relayed", "upstream", f.upstream, "tool", clip(f.name), "err", err)
		return relayState{}, nil, &mcphandler.ToolError{Class: mcphandler.ClassInternal, Err: err,
			Detail: "upstream " + f.upstream + " " + detail}
	}
	switch {
	case round > maxRelayRounds:
		return refuse(fmt.Errorf("%w: more than %d input_required rounds", upstream.ErrTooMany, maxRelayRounds),
			"asked for input more than "+strconv.Itoa(maxRelayRounds)+" times in one call")
	case len(ir.State) > maxRelayedState:
		return refuse(fmt.Errorf("%w: a requestState of %d bytes", upstream.ErrTooLarge, len(ir.State)),
			"asked for input with a requestState over "+strconv.Itoa(maxRelayedState)+" bytes, which this gateway does not relay")
	case len(ir.Requests) > maxRelayedKeys:
		return refuse(fmt.Errorf("%w: %d input requests", upstream.ErrTooMany, len(ir.Requests)), "asked too many questions at once")
	}
	next := relayState{round: round, bind: bind, state: ir.State, keys: make([]string, len(ir.Requests))}
	inputs := make([]mcphandler.Input, len(ir.Requests))
	for i, r := range ir.Requests {
		if len(r.Key) > maxRelayedKey {
			return refuse(fmt.Errorf("%w: an input key of %d bytes", upstream.ErrMalformed, len(r.Key)),
				"asked for input under a key over "+strconv.Itoa(maxRelayedKey)+" bytes")
		}
		if r.Method == "elicitation/create" && !caps.Has(session.CapElicitationURL) && urlMode(r.Params) {
			return refuse(fmt.Errorf("%w: a URL elicitation the client did not declare", upstream.ErrMalformed),
				"asked for a URL elicitation, which this client does not answer")
		}
		next.keys[i] = r.Key
		inputs[i] = mcphandler.Input{Key: relayKey(round, r.Key), Request: &mcphandler.ServerRequest{Method: r.Method, Params: r.Params}}
	}
	return next, inputs, nil
}

// urlMode reports whether elicitation params ask in URL mode.
func urlMode(params json.RawMessage) bool {
	var p struct {
		Mode string `json:"mode"`
	}
	return json.Unmarshal(params, &p) == nil && p.Mode == "url"
}

// answers is the inputResponses of the retry of round s: the client's
// answer to each of its questions, under the upstream's own key, as the
// client sent it; a question the client did not answer, or answered with
// anything but a JSON object within the wire client's bounds, is left out
// (the upstream asks it again). nil when none was answered.
func (s *relayState) answers(x *mcphandler.Exchange) json.RawMessage {
	var out []byte
	for _, k := range s.keys {
		a, ok := x.InputResponse(relayKey(s.round, k))
		if !ok || len(a) == 0 || a[0] != '{' || canon.Check(a, answerLimits) != nil {
			continue
		}
		out = appendMember(out, k, a)
	}
	if out == nil {
		return nil
	}
	return append(out, '}')
}

// answerLimits are the wire client's bounds on JSON, which an answer it
// sends upstream must keep.
var answerLimits = canon.Limits{MaxDepth: 128, MaxNumberBytes: 128}

// upstreamAnswers is the inputResponses of answers to reqs, asked at once.
func upstreamAnswers(reqs []upstream.InputRequest, answers []mcphandler.Answer) json.RawMessage {
	var out []byte
	for i, r := range reqs {
		out = appendMember(out, r.Key, answers[i].Result)
	}
	if out == nil {
		return nil
	}
	return append(out, '}')
}

// appendMember appends "key":value to the object being built in out (nil:
// none yet).
func appendMember(out []byte, key string, value []byte) []byte {
	if out == nil {
		out = []byte{'{'}
	} else {
		out = append(out, ',')
	}
	out = jsonrpc.AppendString(out, key)
	out = append(out, ':')
	return append(out, value...)
}
