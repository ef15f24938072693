package mcphandler_test

import (
	"context"
	"errors"
	"testing"

	"github.com/mcphandler/mcphandler"
)

// A tool handler can be unit-tested without HTTP on a ToolCall built by
// hand: what would reach the client does nothing, and asking the client
// fails with ErrCannotAsk instead of panicking.
func TestHandBuiltToolCall(t *testing.T) {
	for name, call := range map[string]*mcphandler.ToolCall{
		"nil Exchange":  {Tool: mcphandler.Tool{Name: "t"}, Arguments: []byte(`{}`)},
		"zero Exchange": {Tool: mcphandler.Tool{Name: "t"}, Arguments: []byte(`{}`), Exchange: &mcphandler.Exchange{}},
	} {
		t.Run(name, func(t *testing.T) {
			if err := call.Progress(1, 2, "half"); err != nil {
				t.Errorf("Progress: %v", err)
			}
			if err := call.Log(mcphandler.LevelError, "l", "x"); err != nil {
				t.Errorf("Log: %v", err)
			}
			if call.ClientCapabilities() != 0 {
				t.Errorf("ClientCapabilities: %v", call.ClientCapabilities())
			}
			if call.CloseStream() == nil {
				t.Error("CloseStream: no error")
			}
			select {
			case <-call.Disconnected():
				t.Error("Disconnected is closed")
			default:
			}
			ctx := context.Background()
			if _, err := call.Elicit(ctx, mcphandler.ElicitRequest{Message: "ok?"}); !errors.Is(err, mcphandler.ErrCannotAsk) {
				t.Errorf("Elicit: %v, want ErrCannotAsk", err)
			}
			if _, err := call.CreateMessage(ctx, map[string]any{}); !errors.Is(err, mcphandler.ErrCannotAsk) {
				t.Errorf("CreateMessage: %v, want ErrCannotAsk", err)
			}
			if _, err := call.ListRoots(ctx); !errors.Is(err, mcphandler.ErrCannotAsk) {
				t.Errorf("ListRoots: %v, want ErrCannotAsk", err)
			}
			if _, err := call.Ask(ctx, mcphandler.Input{ListRoots: true}); !errors.Is(err, mcphandler.ErrCannotAsk) {
				t.Errorf("Ask: %v, want ErrCannotAsk", err)
			}
		})
	}
}
