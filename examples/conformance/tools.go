package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/elicitation"
)

// conformanceTools returns the tools the suite calls, in the order of its
// scenarios. Every tool has a description: tools-list checks it.
func conformanceTools() []mcphandler.Tool {
	return []mcphandler.Tool{
		fixed("test_simple_text", "Returns one text block.",
			mcphandler.TextContent("This is a simple text response for testing.")),
		fixed("test_image_content", "Returns a 1×1 red PNG image.",
			mcphandler.ImageContent(redPixelPNG, "image/png")),
		fixed("test_audio_content", "Returns a tiny silent WAV clip.",
			mcphandler.AudioContent(silenceWAV, "audio/wav")),
		fixed("test_embedded_resource", "Returns an embedded text resource.",
			mcphandler.EmbeddedResourceContent(mcphandler.ResourceContents{
				URI: "test://embedded-resource", MimeType: "text/plain",
				Text: "This is an embedded resource content.",
			})),
		fixed("test_multiple_content_types", "Returns text, an image and an embedded JSON resource.",
			mcphandler.TextContent("Multiple content types test:"),
			mcphandler.ImageContent(redPixelPNG, "image/png"),
			mcphandler.EmbeddedResourceContent(mcphandler.ResourceContents{
				URI: "test://mixed-content-resource", MimeType: "application/json",
				Text: `{"test":"data","value":123}`,
			})),
		{
			Name:        "test_tool_with_logging",
			Description: "Sends three info log messages, 50 ms apart, while it runs.",
			Handler:     withLogging,
		},
		{
			Name:        "test_tool_with_progress",
			Description: "Reports progress 0, 50 and 100 of 100 while it runs.",
			Handler:     withProgress,
		},
		{
			Name:        "test_error_handling",
			Description: "Always fails with a tool error (an isError result).",
			Handler: func(context.Context, *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
				return nil, &mcphandler.ToolError{Class: mcphandler.ClassInternal,
					Detail: "This tool intentionally returns an error for testing"}
			},
		},
		mcphandler.NewTool(mcphandler.Tool{
			Name:        "test_sampling",
			Description: "Asks the client's model to answer the prompt (sampling/createMessage).",
		}, sample),
		mcphandler.NewTool(mcphandler.Tool{
			Name:        "test_elicitation",
			Description: "Asks the user for a username and an email (elicitation/create).",
		}, elicitUser),
		{
			Name:        "test_elicitation_sep1034_defaults",
			Description: "Asks the user a form whose every field has a default (SEP-1034).",
			Handler:     elicitForm("Please review and update the form fields with defaults", defaultsForm),
		},
		{
			Name:        "test_elicitation_sep1330_enums",
			Description: "Asks the user a form with the five enum shapes of SEP-1330.",
			Handler:     elicitForm("Please select options from the enum fields", enumsForm),
		},
		{
			Name:        "json_schema_2020_12_tool",
			Description: "Has a JSON Schema 2020-12 input schema with $schema, $defs, $anchor, allOf/anyOf, if/then/else and additionalProperties.",
			InputSchema: json.RawMessage(schema202012),
			Handler: func(_ context.Context, call *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
				return mcphandler.TextResult("Received: " + string(call.Arguments)), nil
			},
		},
		{
			Name: "test_reconnection",
			Description: "Closes its SSE stream before the result, so that the client " +
				"resumes with GET and Last-Event-ID and gets the result there (SEP-1699).",
			Handler: func(_ context.Context, call *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
				call.CloseStream()
				time.Sleep(100 * time.Millisecond)
				return mcphandler.TextResult("Reconnection test completed successfully."), nil
			},
		},
	}
}

// fixed returns a tool without arguments that always returns content.
func fixed(name, description string, content ...mcphandler.Content) mcphandler.Tool {
	return mcphandler.Tool{
		Name:        name,
		Description: description,
		Handler: func(context.Context, *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
			return &mcphandler.ToolResult{Content: content}, nil
		},
	}
}

func withLogging(_ context.Context, call *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
	for i, msg := range []string{"Tool execution started", "Tool processing data", "Tool execution completed"} {
		if i > 0 {
			time.Sleep(50 * time.Millisecond)
		}
		if err := call.Log(mcphandler.LevelInfo, "conformance", msg); err != nil {
			return nil, err
		}
	}
	return mcphandler.TextResult("Tool with logging executed successfully"), nil
}

func withProgress(_ context.Context, call *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
	for i, p := range []float64{0, 50, 100} {
		if i > 0 {
			time.Sleep(50 * time.Millisecond)
		}
		if err := call.Progress(p, 100, fmt.Sprintf("Completed step %g of 100", p)); err != nil {
			return nil, err
		}
	}
	return mcphandler.TextResult("Tool with progress executed successfully"), nil
}

type samplingArgs struct {
	Prompt string `json:"prompt" jsonschema:"the prompt to send to the client's model"`
}

// sample sends the prompt to the client's model and returns its answer.
func sample(ctx context.Context, call *mcphandler.ToolCall, in samplingArgs) (string, error) {
	type text struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	type message struct {
		Role    string `json:"role"`
		Content text   `json:"content"`
	}
	raw, err := call.CreateMessage(ctx, struct {
		Messages  []message `json:"messages"`
		MaxTokens int       `json:"maxTokens"`
	}{[]message{{"user", text{"text", in.Prompt}}}, 100})
	if err != nil {
		return "", failed("sampling", err)
	}
	var res struct {
		Content text `json:"content"`
	}
	if err := json.Unmarshal(raw, &res); err != nil || res.Content.Text == "" {
		return "", failed("sampling", fmt.Errorf("no text in the result %s", raw))
	}
	return "LLM response: " + res.Content.Text, nil
}

type elicitationArgs struct {
	Message string `json:"message" jsonschema:"the message shown to the user"`
}

// elicitUser asks the user for a username and an email.
func elicitUser(ctx context.Context, call *mcphandler.ToolCall, in elicitationArgs) (string, error) {
	form := elicitation.NewSchema().
		String("username", elicitation.Title("Username"), elicitation.Required()).
		String("email", elicitation.Title("Email"), elicitation.Format(elicitation.FormatEmail), elicitation.Required())
	res, err := call.Elicit(ctx, mcphandler.ElicitRequest{Message: in.Message, Schema: form})
	if err != nil {
		return "", failed("elicitation", err)
	}
	return answer(res), nil
}

// elicitForm returns a tool handler that asks the user the given form.
func elicitForm(message string, form *elicitation.Schema) mcphandler.ToolHandler {
	return func(ctx context.Context, call *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
		res, err := call.Elicit(ctx, mcphandler.ElicitRequest{Message: message, Schema: form})
		if err != nil {
			return nil, failed("elicitation", err)
		}
		return mcphandler.TextResult(answer(res)), nil
	}
}

// defaultsForm has a default for every primitive type (SEP-1034).
var defaultsForm = elicitation.NewSchema().
	String("name", elicitation.Description("User name"), elicitation.Default("John Doe")).
	Integer("age", elicitation.Description("User age"), elicitation.Default(30)).
	Number("score", elicitation.Description("User score"), elicitation.Default(95.5)).
	Enum("status", []string{"active", "inactive", "pending"},
		elicitation.Description("User status"), elicitation.Default("active")).
	Boolean("verified", elicitation.Description("Verification status"), elicitation.Default(true))

// enumsForm has the five enum shapes of SEP-1330.
var enumsForm = elicitation.NewSchema().
	Enum("untitledSingle", []string{"option1", "option2", "option3"},
		elicitation.Description("Untitled single-select")).
	TitledEnum("titledSingle", []elicitation.Option{
		{Value: "value1", Title: "First Option"},
		{Value: "value2", Title: "Second Option"},
		{Value: "value3", Title: "Third Option"},
	}, elicitation.Description("Titled single-select")).
	LegacyEnum("legacyEnum", []string{"opt1", "opt2", "opt3"},
		[]string{"Option One", "Option Two", "Option Three"},
		elicitation.Description("Legacy titled single-select (enumNames)")).
	MultiEnum("untitledMulti", []string{"option1", "option2", "option3"},
		elicitation.Description("Untitled multi-select")).
	TitledMultiEnum("titledMulti", []elicitation.Option{
		{Value: "value1", Title: "First Choice"},
		{Value: "value2", Title: "Second Choice"},
		{Value: "value3", Title: "Third Choice"},
	}, elicitation.Description("Titled multi-select"))

// answer describes the user's answer as the tool's text.
func answer(res elicitation.Result) string {
	content, _ := json.Marshal(res.Content)
	return fmt.Sprintf("User response: action=%s, content=%s", res.Action, content)
}

// failed reports a failed request to the client as a tool error that says
// why: this is a test server, so its errors may be shown.
func failed(what string, err error) error {
	return &mcphandler.ToolError{Class: mcphandler.ClassInternal, Detail: what + " failed: " + err.Error(), Err: err}
}

// schema202012 is served verbatim: the suite checks that $schema, $defs and
// additionalProperties (SEP-1613) and, from 2026-07-28, $anchor, the
// composition keywords allOf/anyOf and the conditional keywords
// if/then/else (SEP-2106) reach the client untouched.
const schema202012 = `{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "$defs": {
    "address": {
      "$anchor": "addressDef",
      "type": "object",
      "properties": {
        "street": {"type": "string"},
        "city": {"type": "string"}
      }
    }
  },
  "properties": {
    "name": {"type": "string"},
    "address": {"$ref": "#/$defs/address"},
    "contactMethod": {"type": "string", "enum": ["phone", "email"]},
    "phone": {"type": "string"},
    "email": {"type": "string"}
  },
  "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
  "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
  "then": {"required": ["phone"]},
  "else": {"required": ["email"]},
  "additionalProperties": false
}`

func init() {
	// A form built with a mistake would only fail when a tool runs: fail
	// at start-up instead.
	for _, form := range []*elicitation.Schema{defaultsForm, enumsForm} {
		if err := form.Err(); err != nil {
			panic(err)
		}
	}
}
