package task

import (
	"encoding/json"
	"testing"

	"github.com/mcphandler/mcphandler/session"
)

// A task's statusMessage describes its current status: once every input
// request is answered the task is working again, and once it completes
// it is done, so neither may still say it waits for input. Found by the
// v2 TypeScript client through examples/gateway (scripts/clients.sh): a
// completed task answered tasks/get with statusMessage "waiting for input
// from the client".
func TestStatusMessageLeavesWithInput(t *testing.T) {
	m := (&replicas{t: t, mem: session.NewMemory()}).add()
	run, d := mustCreate(t, m, alice)
	const waiting = "waiting for input from the client"
	ask := json.RawMessage(`{"method":"elicitation/create","params":{"message":"Delete?","requestedSchema":{"type":"object"}}}`)
	if err := run.RequestInput(ctxT(t), map[string]json.RawMessage{"elicit-1": ask}, waiting); err != nil {
		t.Fatal(err)
	}
	if got := mustGet(t, m, alice, d.TaskID); got.Status != InputRequired || got.StatusMessage != waiting {
		t.Fatalf("asked: %+v", got)
	}
	if err := m.Update(ctxT(t), alice, d.TaskID, map[string]json.RawMessage{"elicit-1": json.RawMessage(`{"action":"accept"}`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := run.AwaitInput(ctxT(t), "elicit-1"); err != nil {
		t.Fatal(err)
	}
	if got := mustGet(t, m, alice, d.TaskID); got.Status != Working || got.StatusMessage == waiting {
		t.Errorf("every input answered: status %s, statusMessage %q", got.Status, got.StatusMessage)
	}
	if err := run.Complete(ctxT(t), result("deleted")); err != nil {
		t.Fatal(err)
	}
	if got := mustGet(t, m, alice, d.TaskID); got.Status != Completed || got.StatusMessage == waiting {
		t.Errorf("completed: status %s, statusMessage %q", got.Status, got.StatusMessage)
	}
}
