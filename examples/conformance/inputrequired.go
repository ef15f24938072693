package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/elicitation"
	"github.com/mcphandler/mcphandler/session"
)

// The fixtures of the input-required-result-* scenarios (multi round-trip
// requests, SEP-2322). Each handler is written once, with the Exchange
// methods, and serves both eras:
//
//   - on 2026-07-28 an unanswered question makes the method return
//     mcphandler.ErrInputRequired (wrapped), and the handler answers
//     resultType "input_required" with the questions and a sealed
//     requestState; on the retry the handler runs again from the start and
//     the same questions, asked in the same order, return their answers;
//   - on a 2025 session the same calls are server-to-client requests on
//     the request's SSE stream, answered before the handler goes on.
//
// The handlers never build inputRequests, keys or requestState
// themselves: that, and the integrity of the state (AES-GCM sealed, bound
// to the caller, the tool and its arguments), is the library's job.
func inputRequiredTools() []mcphandler.Tool {
	return []mcphandler.Tool{
		{
			Name:        "test_input_required_result_elicitation",
			Description: "Asks the user's name (one elicitation), then greets them.",
			Handler: func(ctx context.Context, call *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
				res, err := call.Elicit(ctx, mcphandler.ElicitRequest{Key: "user_name", Message: "What is your name?", Schema: nameForm})
				if err != nil {
					return nil, failed("elicitation", err)
				}
				if res.Action != elicitation.Accept {
					return declined(res), nil
				}
				return mcphandler.TextResult(fmt.Sprintf("Hello, %v!", res.Content["name"])), nil
			},
		},
		{
			Name:        "test_input_required_result_sampling",
			Description: "Asks the client's model the capital of France (one sampling request) and returns its answer.",
			Handler: func(ctx context.Context, call *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
				raw, err := call.CreateMessage(ctx, samplingParams("What is the capital of France?", 100))
				if err != nil {
					return nil, failed("sampling", err)
				}
				return mcphandler.TextResult("Model answered: " + sampledText(raw)), nil
			},
		},
		{
			Name:        "test_input_required_result_list_roots",
			Description: "Asks the client for its roots (one roots/list request) and lists them.",
			Handler: func(ctx context.Context, call *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
				roots, err := call.ListRoots(ctx)
				if err != nil {
					return nil, failed("roots/list", err)
				}
				return mcphandler.TextResult("Client roots: " + describeRoots(roots)), nil
			},
		},
		{
			Name: "test_input_required_result_request_state",
			Description: "Asks for a confirmation; the retry is only served when its requestState " +
				"opens (it is sealed by the server), and the result then says state-ok.",
			Handler: func(ctx context.Context, call *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
				res, err := call.Elicit(ctx, mcphandler.ElicitRequest{Message: "Please confirm", Schema: confirmForm})
				if err != nil {
					return nil, failed("elicitation", err)
				}
				// Reaching this line on 2026-07-28 means the library opened
				// and verified the echoed requestState.
				return mcphandler.TextResult(fmt.Sprintf("state-ok: action=%s, ok=%v", res.Action, res.Content["ok"])), nil
			},
		},
		{
			Name:        "test_input_required_result_multiple_inputs",
			Description: "Asks for the user's name, a greeting from the model and the client's roots, all in one round.",
			Handler: func(ctx context.Context, call *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
				answers, err := call.Ask(ctx,
					mcphandler.Input{Elicit: &mcphandler.ElicitRequest{Message: "What is your name?", Schema: nameForm}},
					mcphandler.Input{CreateMessage: samplingParams("Generate a greeting", 50)},
					mcphandler.Input{ListRoots: true},
				)
				if err != nil {
					return nil, failed("input requests", err)
				}
				return mcphandler.TextResult(fmt.Sprintf("name=%v, greeting=%s, roots=%s",
					answers[0].Elicit.Content["name"], sampledText(answers[1].CreateMessage), describeRoots(answers[2].Roots))), nil
			},
		},
		{
			Name:        "test_input_required_result_multi_round",
			Description: "Asks two questions in two rounds (name, then favourite colour), then answers.",
			Handler: func(ctx context.Context, call *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
				name, err := call.Elicit(ctx, mcphandler.ElicitRequest{Message: "Step 1: What is your name?", Schema: nameForm})
				if err != nil {
					return nil, failed("step 1", err)
				}
				if name.Action != elicitation.Accept {
					return declined(name), nil
				}
				color, err := call.Elicit(ctx, mcphandler.ElicitRequest{Message: "Step 2: What is your favorite color?", Schema: colorForm})
				if err != nil {
					return nil, failed("step 2", err)
				}
				if color.Action != elicitation.Accept {
					return declined(color), nil
				}
				return mcphandler.TextResult(fmt.Sprintf("%v likes %v.", name.Content["name"], color.Content["color"])), nil
			},
		},
		{
			Name: "test_input_required_result_tampered_state",
			Description: "Asks for a confirmation with an integrity-protected requestState: " +
				"a retry whose state was altered is rejected with -32602.",
			Handler: func(ctx context.Context, call *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
				res, err := call.Elicit(ctx, mcphandler.ElicitRequest{Message: "Please confirm", Schema: confirmForm})
				if err != nil {
					return nil, failed("elicitation", err)
				}
				return mcphandler.TextResult(fmt.Sprintf("Confirmed: action=%s, ok=%v", res.Action, res.Content["ok"])), nil
			},
		},
		{
			Name: "test_input_required_result_capabilities",
			Description: "Asks only what the request's client capabilities allow: " +
				"elicitation, sampling and roots, each if declared.",
			Handler: askDeclared,
		},
	}
}

// askDeclared asks one question of each kind the client declared, and
// none of the others: the client must never receive an input request for
// a capability it did not declare (on 2026-07-28 the capabilities are
// those of this very request).
func askDeclared(ctx context.Context, call *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
	caps := call.ClientCapabilities()
	var inputs []mcphandler.Input
	var kinds []string
	if caps.Has(session.CapElicitationForm) {
		inputs = append(inputs, mcphandler.Input{Elicit: &mcphandler.ElicitRequest{Message: "What is your name?", Schema: nameForm}})
		kinds = append(kinds, "elicitation")
	}
	if caps.Has(session.CapSampling) {
		inputs = append(inputs, mcphandler.Input{CreateMessage: samplingParams("Generate a greeting", 50)})
		kinds = append(kinds, "sampling")
	}
	if caps.Has(session.CapRoots) {
		inputs = append(inputs, mcphandler.Input{ListRoots: true})
		kinds = append(kinds, "roots")
	}
	if len(inputs) == 0 {
		return mcphandler.TextResult("The client declared no capability to ask with: nothing asked."), nil
	}
	if _, err := call.Ask(ctx, inputs...); err != nil {
		return nil, failed("input requests", err)
	}
	return mcphandler.TextResult("Answered: " + strings.Join(kinds, ", ")), nil
}

// inputRequiredPrompt is the prompt of input-required-result-non-tool-request:
// prompts/get asks the user for context before it renders.
var inputRequiredPrompt = mcphandler.Prompt{
	Name:        "test_input_required_result_prompt",
	Description: "Asks the user what context to use (one elicitation), then renders a prompt with it.",
}

func getInputRequiredPrompt(ctx context.Context, req *mcphandler.PromptRequest) (*mcphandler.PromptResult, error) {
	res, err := req.Elicit(ctx, mcphandler.ElicitRequest{Message: "What context should the prompt use?", Schema: contextForm})
	if err != nil {
		var missing *mcphandler.MissingCapabilityError
		if errors.As(err, &missing) {
			// 2026-07-28 answers -32021 from the wrapped
			// MissingCapabilityError; a 2025 client gets this
			// -32602 instead of an internal error.
			return nil, fmt.Errorf("%w: %w", mcphandler.NewError(mcphandler.CodeInvalidParams,
				"This prompt asks the user for context: the client must declare the elicitation capability"), err)
		}
		return nil, err // ErrInputRequired on 2026-07-28: the library answers input_required
	}
	text := "Use no particular context."
	if res.Action == elicitation.Accept {
		text = fmt.Sprintf("Use this context: %v", res.Content["context"])
	}
	return &mcphandler.PromptResult{Messages: []mcphandler.PromptMessage{
		{Role: "user", Content: mcphandler.TextContent(text)},
	}}, nil
}

// The forms of these fixtures: one required field each, named as the
// suite answers them.
var (
	nameForm    = elicitation.NewSchema().String("name", elicitation.Title("Name"), elicitation.Required())
	colorForm   = elicitation.NewSchema().String("color", elicitation.Title("Favorite color"), elicitation.Required())
	confirmForm = elicitation.NewSchema().Boolean("ok", elicitation.Title("Confirm"), elicitation.Required())
	contextForm = elicitation.NewSchema().String("context", elicitation.Title("Context"), elicitation.Required())
)

// samplingMessage is a sampling/createMessage text message.
type samplingMessage struct {
	Role    string `json:"role"`
	Content struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
}

// samplingParams are the params of a sampling/createMessage asking prompt.
func samplingParams(prompt string, maxTokens int) any {
	msg := samplingMessage{Role: "user"}
	msg.Content.Type, msg.Content.Text = "text", prompt
	return struct {
		Messages  []samplingMessage `json:"messages"`
		MaxTokens int               `json:"maxTokens"`
	}{[]samplingMessage{msg}, maxTokens}
}

// sampledText is the text of a CreateMessageResult, or a note that it had
// none.
func sampledText(raw json.RawMessage) string {
	var res samplingMessage
	if json.Unmarshal(raw, &res) != nil || res.Content.Text == "" {
		return "(no text)"
	}
	return res.Content.Text
}

func describeRoots(roots []mcphandler.Root) string {
	if len(roots) == 0 {
		return "(none)"
	}
	parts := make([]string, len(roots))
	for i, r := range roots {
		parts[i] = r.URI
		if r.Name != "" {
			parts[i] += " (" + r.Name + ")"
		}
	}
	return strings.Join(parts, ", ")
}

// declined is the result of a tool whose question the user declined or
// cancelled: an application decision, not a protocol error.
func declined(res elicitation.Result) *mcphandler.ToolResult {
	return mcphandler.ErrorResult(fmt.Sprintf("The user did not answer (action=%s).", res.Action))
}

func init() {
	for _, form := range []*elicitation.Schema{nameForm, colorForm, confirmForm, contextForm} {
		if err := form.Err(); err != nil {
			panic(err)
		}
	}
}
