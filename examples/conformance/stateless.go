package main

import (
	"context"
	"encoding/json"

	"github.com/mcphandler/mcphandler"
)

// The diagnostic fixtures of the 2026-07-28 scenarios server-stateless,
// http-header-validation and http-custom-header-server-validation. They
// also work for 2025 clients.

// notifier is the part of the Handler the trigger tools use. The Handler
// is created after its tools, so newHandler fills it in once New returns.
type notifier struct{ h *mcphandler.Handler }

func statelessTools(n *notifier) []mcphandler.Tool {
	return []mcphandler.Tool{
		{
			Name: "test_missing_capability",
			Description: "Needs the sampling capability: a request that did not declare it is " +
				"refused (-32021 on 2026-07-28).",
			Handler: func(ctx context.Context, call *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
				raw, err := call.CreateMessage(ctx, samplingParams("Say hello.", 20))
				if err != nil {
					return nil, failed("sampling", err)
				}
				return mcphandler.TextResult("Model answered: " + sampledText(raw)), nil
			},
		},
		{
			Name: "test_streaming_elicitation",
			Description: "Asks the user for confirmation while it runs: an input_required result " +
				"on 2026-07-28, an elicitation/create on the request's stream on 2025.",
			Handler: func(ctx context.Context, call *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
				if err := call.Progress(0, 1, "asking the user"); err != nil {
					return nil, err
				}
				res, err := call.Elicit(ctx, mcphandler.ElicitRequest{Message: "Please confirm", Schema: confirmForm})
				if err != nil {
					return nil, failed("elicitation", err)
				}
				return mcphandler.TextResult(answer(res)), nil
			},
		},
		{
			Name: "test_logging_tool",
			Description: "Logs three info messages while it runs; they are sent only to a client " +
				"that asked for logs (logging/setLevel on 2025, _meta logLevel on 2026-07-28).",
			Handler: withLogging,
		},
		{
			Name: "test_trigger_tool_change",
			Description: "Announces that the tool list changed (notifications/tools/list_changed " +
				"on subscriptions/listen streams and 2025 GET streams).",
			Handler: func(ctx context.Context, _ *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
				if err := n.h.NotifyToolsChanged(ctx, mcphandler.Everyone()); err != nil {
					return nil, mcphandler.Unavailable(err)
				}
				return mcphandler.TextResult("Sent notifications/tools/list_changed."), nil
			},
		},
		{
			Name: "test_trigger_prompt_change",
			Description: "Announces that the prompt list changed (notifications/prompts/list_changed " +
				"on subscriptions/listen streams and 2025 GET streams).",
			Handler: func(ctx context.Context, _ *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
				if err := n.h.NotifyPromptsChanged(ctx, mcphandler.Everyone()); err != nil {
					return nil, mcphandler.Unavailable(err)
				}
				return mcphandler.TextResult("Sent notifications/prompts/list_changed."), nil
			},
		},
		mcphandler.NewTool(mcphandler.Tool{
			Name: "test_mirrored_header",
			Description: "Echoes its region argument, which 2026-07-28 clients mirror in the " +
				"Mcp-Param-Region header (x-mcp-header); the handler checks that they match.",
			InputSchema: json.RawMessage(mirroredHeaderSchema),
		}, func(_ context.Context, _ *mcphandler.ToolCall, in mirroredHeaderArgs) (string, error) {
			return "region=" + in.Region, nil
		}),
	}
}

type mirroredHeaderArgs struct {
	Region string `json:"region"`
}

// mirroredHeaderSchema annotates region with x-mcp-header (SEP-2243).
const mirroredHeaderSchema = `{
  "type": "object",
  "properties": {
    "region": {
      "type": "string",
      "description": "Any region name; mirrored in the Mcp-Param-Region header.",
      "x-mcp-header": "Region"
    }
  },
  "required": ["region"]
}`
