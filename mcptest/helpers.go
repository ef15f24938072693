package mcptest

import (
	"context"
	"encoding/json"
	"fmt"
)

// maxPages bounds ListTools against a server that never stops paginating.
const maxPages = 10000

// ListToolsPage sends one tools/list request, with the given cursor unless
// it is "", and returns the tools and the nextCursor ("" on the last page).
func (c *Client) ListToolsPage(ctx context.Context, cursor string) ([]Tool, string, error) {
	var params any
	if cursor != "" {
		params = map[string]string{"cursor": cursor}
	}
	raw, err := c.Call(ctx, "tools/list", params)
	if err != nil {
		return nil, "", err
	}
	var res struct {
		Tools      []json.RawMessage `json:"tools"`
		NextCursor string            `json:"nextCursor"`
	}
	if err := json.Unmarshal(raw, &res); err != nil {
		return nil, "", fmt.Errorf("mcptest: decoding tools/list result %s: %w", truncate(raw), err)
	}
	if res.Tools == nil {
		return nil, "", fmt.Errorf("mcptest: tools/list result has no tools array: %s", truncate(raw))
	}
	tools := make([]Tool, len(res.Tools))
	for i, r := range res.Tools {
		if err := json.Unmarshal(r, &tools[i]); err != nil {
			return nil, "", fmt.Errorf("mcptest: decoding tool %s: %w", truncate(r), err)
		}
		tools[i].Raw = r
	}
	return tools, res.NextCursor, nil
}

// ListTools lists all tools, following nextCursor until the last page. It
// fails if the server repeats a cursor.
func (c *Client) ListTools(ctx context.Context) ([]Tool, error) {
	var all []Tool
	seen := map[string]bool{}
	cursor := ""
	for range maxPages {
		tools, next, err := c.ListToolsPage(ctx, cursor)
		if err != nil {
			return all, err
		}
		all = append(all, tools...)
		if next == "" {
			if all == nil {
				all = []Tool{}
			}
			return all, nil
		}
		if seen[next] {
			return all, fmt.Errorf("mcptest: tools/list repeated cursor %q", next)
		}
		seen[next] = true
		cursor = next
	}
	return all, fmt.Errorf("mcptest: tools/list did not end after %d pages", maxPages)
}

// CallTool calls a tool with [Client.Call] (so, for [Stateless],
// answering input_required rounds). args is encoded as the arguments
// member; nil sends no arguments member. A tool failure is a result with
// IsError set, not an error; protocol errors come back as *[RPCError].
func (c *Client) CallTool(ctx context.Context, name string, args any) (*ToolResult, error) {
	a, err := marshalParams(args)
	if err != nil {
		return nil, err
	}
	params := struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments,omitempty"`
	}{name, a}
	raw, err := c.Call(ctx, "tools/call", params)
	if err != nil {
		return nil, err
	}
	return decodeToolResult(raw)
}

func decodeToolResult(raw json.RawMessage) (*ToolResult, error) {
	var res struct {
		ToolResult
		Content []json.RawMessage `json:"content"`
	}
	if err := json.Unmarshal(raw, &res); err != nil {
		return nil, fmt.Errorf("mcptest: decoding tools/call result %s: %w", truncate(raw), err)
	}
	out := res.ToolResult
	out.Raw = raw
	out.Content = make([]Content, len(res.Content))
	for i, r := range res.Content {
		if err := json.Unmarshal(r, &out.Content[i]); err != nil {
			return nil, fmt.Errorf("mcptest: decoding content %s: %w", truncate(r), err)
		}
		out.Content[i].Raw = r
	}
	return &out, nil
}

// Ping sends ping and checks that the result is a JSON object.
func (c *Client) Ping(ctx context.Context) error {
	raw, err := c.Call(ctx, "ping", nil)
	if err != nil {
		return err
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
		return fmt.Errorf("mcptest: ping result is not an object: %s", truncate(raw))
	}
	return nil
}

// SetLogLevel sends logging/setLevel with the given level ("debug", "info",
// "notice", "warning", "error", "critical", "alert", "emergency").
func (c *Client) SetLogLevel(ctx context.Context, level string) error {
	_, err := c.Call(ctx, "logging/setLevel", map[string]string{"level": level})
	return err
}

// Discover sends server/discover, a [Stateless] request, and returns its
// result.
func (c *Client) Discover(ctx context.Context) (json.RawMessage, error) {
	return c.Call(ctx, "server/discover", nil)
}

// ReadResource sends resources/read for uri and returns the result.
func (c *Client) ReadResource(ctx context.Context, uri string) (json.RawMessage, error) {
	return c.Call(ctx, "resources/read", map[string]string{"uri": uri})
}

// GetPrompt sends prompts/get and returns the result. args nil sends no
// arguments member.
func (c *Client) GetPrompt(ctx context.Context, name string, args map[string]string) (json.RawMessage, error) {
	return c.Call(ctx, "prompts/get", struct {
		Name      string            `json:"name"`
		Arguments map[string]string `json:"arguments,omitempty"`
	}{name, args})
}
