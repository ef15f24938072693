package main

import (
	"context"
	"encoding/json"
	"time"

	"github.com/mcphandler/mcphandler"
)

// export_docs is the demo's long call: visible to every token, it waits
// delay_ms, then returns the caller's documents. A client that declared
// the tasks extension (2026-07-28) gets a task, which any process sharing
// Redis reads and cancels; others get the result when the wait ends.

// Bounds of export_docs's delay_ms.
const (
	defaultExportDelay = 2000
	maxExportDelay     = 60000
)

type exportIn struct {
	DelayMs *int `json:"delay_ms,omitempty"`
}

const exportSchema = `{"type":"object","properties":{"delay_ms":{"type":"integer","minimum":0,"maximum":60000,"default":2000,` +
	`"description":"How long the export takes, in milliseconds: default 2000, at most 60000."}},"additionalProperties":false}`

func (d *demo) exportDocsTool() mcphandler.Tool {
	t := mcphandler.NewTool(mcphandler.Tool{
		Name:        "export_docs",
		Title:       "Export documents",
		Description: "Exports every document of your workspace as {docs:[{id,title}], count}, after delay_ms. Runs as a task for clients that support tasks.",
		InputSchema: json.RawMessage(exportSchema),
		Annotations: readOnly,
		TaskSupport: mcphandler.TaskOptional,
	}, func(context.Context, *mcphandler.ToolCall, exportIn) (searchOut, error) {
		return searchOut{}, nil // replaced below: the typed tool gives the schemas and validation
	})
	t.Handler = d.runExport
	return t
}

// runExport waits delay_ms (as a task when it can), stopping at once when
// the call or the task is cancelled, then lists the caller's documents.
func (d *demo) runExport(ctx context.Context, call *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
	var in exportIn
	if err := json.Unmarshal(call.Arguments, &in); err != nil {
		return nil, mcphandler.BadArgs("%v", err)
	}
	delay := defaultExportDelay
	if in.DelayMs != nil {
		delay = *in.DelayMs
	}
	if delay < 0 || delay > maxExportDelay {
		return nil, mcphandler.BadArgs("delay_ms must be from 0 to %d", maxExportDelay)
	}
	tenant := call.Identity.Tenant
	return call.RunAsTask(ctx, func(ctx context.Context, _ *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
		t := time.NewTimer(time.Duration(delay) * time.Millisecond)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-t.C:
		}
		docs, err := d.docs.list(ctx, tenant)
		if err != nil {
			return nil, mcphandler.Unavailable(err)
		}
		out := searchOut{Docs: append([]doc{}, docs...), Count: len(docs)}
		b, err := json.Marshal(out)
		if err != nil {
			return nil, err
		}
		return &mcphandler.ToolResult{Content: []mcphandler.Content{mcphandler.TextContent(string(b))}, StructuredContent: out}, nil
	})
}
