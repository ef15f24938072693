package main

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/elicitation"
)

// taskTools are the fixtures of the tasks-* scenarios (the extension
// io.modelcontextprotocol/tasks of 2026-07-28): a sync-only tool, and
// tools whose work runs as a task when the client declared the extension
// (ToolCall.RunAsTask), inline otherwise.
func taskTools() []mcphandler.Tool {
	return []mcphandler.Tool{
		mcphandler.NewTool(mcphandler.Tool{Name: "greet", Description: "Greets name (never a task)."},
			func(_ context.Context, _ *mcphandler.ToolCall, in greetArgs) (string, error) {
				return "Hello, " + in.Name + "!", nil
			}),
		{
			Name:        "slow_compute",
			Description: "Sleeps seconds (stopping at once when cancelled), then reports label.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"seconds":{"type":"number","minimum":0,"maximum":600},"label":{"type":"string"}}}`),
			TaskSupport: mcphandler.TaskOptional,
			Handler:     slowCompute,
		},
		{
			Name:        "failing_job",
			Description: "Runs only as a task; reports a tool error after about a second.",
			TaskSupport: mcphandler.TaskRequired,
			Handler: asTask(func(ctx context.Context, _ *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
				if err := sleep(ctx, time.Second); err != nil {
					return nil, err
				}
				return mcphandler.ErrorResult("the job failed, as it always does"), nil
			}),
		},
		{
			Name:        "protocol_error_job",
			Description: "Panics in its task: the task fails with a protocol error.",
			TaskSupport: mcphandler.TaskOptional,
			Handler: asTask(func(context.Context, *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
				panic("protocol_error_job always panics")
			}),
		},
		{
			Name:        "confirm_delete",
			Description: "Asks, from its task, whether to delete filename.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"filename":{"type":"string"}}}`),
			TaskSupport: mcphandler.TaskOptional,
			Handler:     asTask(confirmDelete),
		},
		{
			Name:        "multi_input",
			Description: "Asks two questions at once from its task, then reports both answers.",
			TaskSupport: mcphandler.TaskOptional,
			Handler:     asTask(multiInput),
		},
		{
			Name:        "test_tool_with_task",
			Description: "Asks the user's name in an input_required round, then greets them from a task.",
			TaskSupport: mcphandler.TaskOptional,
			Handler:     nameThenTask,
		},
	}
}

type greetArgs struct {
	Name string `json:"name" jsonschema:"who to greet"`
}

// asTask returns a handler that runs work as a task (or inline).
func asTask(work mcphandler.ToolHandler) mcphandler.ToolHandler {
	return func(ctx context.Context, call *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
		return call.RunAsTask(ctx, work)
	}
}

// sleep waits d, or returns ctx's error first.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func slowCompute(ctx context.Context, call *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
	var in struct {
		Seconds float64 `json:"seconds"`
		Label   string  `json:"label"`
	}
	if err := json.Unmarshal(call.Arguments, &in); err != nil || in.Seconds < 0 || in.Seconds > 600 {
		return mcphandler.ErrorResult("seconds must be a number from 0 to 600"), nil
	}
	return call.RunAsTask(ctx, func(ctx context.Context, _ *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
		if err := sleep(ctx, time.Duration(in.Seconds*float64(time.Second))); err != nil {
			return nil, err
		}
		return mcphandler.TextResult(fmt.Sprintf("computed %q in %gs", in.Label, in.Seconds)), nil
	})
}

var deleteForm = elicitation.NewSchema().Boolean("confirm", elicitation.Title("Delete the file?"))

func confirmDelete(ctx context.Context, call *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
	var in struct {
		Filename string `json:"filename"`
	}
	json.Unmarshal(call.Arguments, &in)
	res, err := call.Elicit(ctx, mcphandler.ElicitRequest{Message: "Delete " + in.Filename + "?", Schema: deleteForm})
	if err != nil {
		return nil, failed("elicitation", err)
	}
	if res.Action != elicitation.Accept || res.Content["confirm"] != true {
		return mcphandler.TextResult("kept " + in.Filename), nil
	}
	return mcphandler.TextResult("deleted " + in.Filename), nil
}

var partForm = elicitation.NewSchema().String("name", elicitation.Title("Name")).Boolean("confirm", elicitation.Title("Confirm"))

// multiInput asks two questions in parallel, so that both are pending at
// once.
func multiInput(ctx context.Context, call *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
	var wg sync.WaitGroup
	answers := make([]string, 2)
	errs := make([]error, 2)
	for i := range 2 {
		wg.Go(func() {
			res, err := call.Elicit(ctx, mcphandler.ElicitRequest{Message: fmt.Sprintf("Part %d?", i+1), Schema: partForm})
			answers[i], errs[i] = answer(res), err
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, failed("elicitation", err)
		}
	}
	return mcphandler.TextResult("part 1: " + answers[0] + "; part 2: " + answers[1]), nil
}

// nameThenTask asks the name in the request's own rounds, and only then
// becomes a task: the task is created on the final round.
func nameThenTask(ctx context.Context, call *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
	res, err := call.Elicit(ctx, mcphandler.ElicitRequest{Key: "user_name", Message: "What is your name?", Schema: nameForm})
	if err != nil {
		return nil, failed("elicitation", err)
	}
	if res.Action != elicitation.Accept {
		return declined(res), nil
	}
	name := fmt.Sprint(res.Content["name"])
	return call.RunAsTask(ctx, func(context.Context, *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
		return mcphandler.TextResult("Hello, " + name + "!"), nil
	})
}

func init() {
	for _, form := range []*elicitation.Schema{deleteForm, partForm} {
		if err := form.Err(); err != nil {
			panic(err)
		}
	}
}
