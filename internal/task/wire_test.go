package task

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/mcphandler/mcphandler/internal/jsonrpc"
)

// jsonEqual fails the test unless got marshals to the same JSON value as
// want.
func jsonEqual(t *testing.T, got any, want string) {
	t.Helper()
	b, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	var g, w any
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("bad want: %v", err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Fatalf("got  %s\nwant %s", b, want)
	}
}

func ms(v int64) *int64 { return &v }

var exampleTask = Task{TaskID: "6f1c2b9e-4d0a-4e0b-9a43-0d7f0e3c1b22", Status: Working,
	CreatedAt: "2026-08-01T10:00:00Z", LastUpdatedAt: "2026-08-01T10:00:00Z", TTLMs: ms(3600000), PollIntervalMs: 2000}

// The shapes of SEP-2663 (2026-07-28), against the spec's examples.
func TestWire2026(t *testing.T) {
	// CreateTaskResult: flat, resultType "task".
	jsonEqual(t, exampleTask.Created(), `{"resultType":"task","taskId":"6f1c2b9e-4d0a-4e0b-9a43-0d7f0e3c1b22",
		"status":"working","createdAt":"2026-08-01T10:00:00Z","lastUpdatedAt":"2026-08-01T10:00:00Z",
		"ttlMs":3600000,"pollIntervalMs":2000}`)

	// tasks/get of an input_required task.
	d := DetailedTask{Task: exampleTask}
	d.Status, d.LastUpdatedAt = InputRequired, "2026-08-01T10:00:05Z"
	d.InputRequests = map[string]json.RawMessage{"approve": json.RawMessage(`{"method":"elicitation/create","params":{"message":"Approve deploy?",
		"requestedSchema":{"type":"object","properties":{"ok":{"type":"boolean"}}}}}`)}
	jsonEqual(t, d.Get(), `{"resultType":"complete","taskId":"6f1c2b9e-4d0a-4e0b-9a43-0d7f0e3c1b22",
		"status":"input_required","createdAt":"2026-08-01T10:00:00Z","lastUpdatedAt":"2026-08-01T10:00:05Z",
		"ttlMs":3600000,"pollIntervalMs":2000,
		"inputRequests":{"approve":{"method":"elicitation/create","params":{"message":"Approve deploy?",
		"requestedSchema":{"type":"object","properties":{"ok":{"type":"boolean"}}}}}}}`)

	// Completed inlines the result; failed carries a JSON-RPC error object.
	c := DetailedTask{Task: exampleTask, Result: json.RawMessage(`{"content":[{"type":"text","text":"ok"}],"isError":true}`)}
	c.Status = Completed
	jsonEqual(t, c.Get(), `{"resultType":"complete","taskId":"6f1c2b9e-4d0a-4e0b-9a43-0d7f0e3c1b22","status":"completed",
		"createdAt":"2026-08-01T10:00:00Z","lastUpdatedAt":"2026-08-01T10:00:00Z","ttlMs":3600000,"pollIntervalMs":2000,
		"result":{"content":[{"type":"text","text":"ok"}],"isError":true}}`)
	f := DetailedTask{Task: exampleTask, Error: &jsonrpc.Error{Code: -32603, Message: "boom"}}
	f.Status = Failed
	jsonEqual(t, f, `{"taskId":"6f1c2b9e-4d0a-4e0b-9a43-0d7f0e3c1b22","status":"failed",
		"createdAt":"2026-08-01T10:00:00Z","lastUpdatedAt":"2026-08-01T10:00:00Z","ttlMs":3600000,"pollIntervalMs":2000,
		"error":{"code":-32603,"message":"boom"}}`)

	// tasks/update and tasks/cancel: an empty ack.
	jsonEqual(t, Ack{ResultType: ResultTypeComplete}, `{"resultType":"complete"}`)

	// ttlMs is always present: null means unlimited.
	jsonEqual(t, Task{TaskID: "x", Status: Working, CreatedAt: "a", LastUpdatedAt: "b"},
		`{"taskId":"x","status":"working","createdAt":"a","lastUpdatedAt":"b","ttlMs":null}`)

	// What conformance forbids on the 2026 wire never appears.
	b, _ := json.Marshal(exampleTask.Created())
	for _, k := range []string{`"ttl"`, `"pollInterval"`, `"requestState"`, `"task"`, `"result"`, `"error"`, `"inputRequests"`} {
		if bytes.Contains(b, []byte(k+":")) {
			t.Fatalf("CreateTaskResult has %s: %s", k, b)
		}
	}
}

// The shapes of 2025-11-25 experimental tasks.
func TestWire2025(t *testing.T) {
	d := DetailedTask{Task: exampleTask}
	d.StatusMessage = "Processing..."
	jsonEqual(t, CreateTaskResult2025{Task: d.Task2025()}, `{"task":{"taskId":"6f1c2b9e-4d0a-4e0b-9a43-0d7f0e3c1b22",
		"status":"working","statusMessage":"Processing...","createdAt":"2026-08-01T10:00:00Z",
		"lastUpdatedAt":"2026-08-01T10:00:00Z","ttl":3600000,"pollInterval":2000}}`)
	jsonEqual(t, ListResult2025{Tasks: []Task2025{d.Task2025()}, NextCursor: "c"}, `{"tasks":[{"taskId":"6f1c2b9e-4d0a-4e0b-9a43-0d7f0e3c1b22",
		"status":"working","statusMessage":"Processing...","createdAt":"2026-08-01T10:00:00Z",
		"lastUpdatedAt":"2026-08-01T10:00:00Z","ttl":3600000,"pollInterval":2000}],"nextCursor":"c"}`)

	// isError: completed in 2026-07-28, failed in 2025-11-25.
	d.Status, d.Result = Completed, json.RawMessage(`{"content":[],"isError":true}`)
	if d.Task2025().Status != Failed {
		t.Fatalf("2025-11-25 status of a tool error: %s", d.Task2025().Status)
	}
	d.Result = json.RawMessage(`{"content":[]}`)
	if d.Task2025().Status != Completed {
		t.Fatalf("2025-11-25 status of a result: %s", d.Task2025().Status)
	}
}

// Timestamps are ISO 8601 in UTC.
func TestWireTime(t *testing.T) {
	if got := wireTime(1785578400123); got != "2026-08-01T10:00:00.123Z" {
		t.Fatal(got)
	}
}

// The params parsers treat every input as hostile.
func TestParseParams(t *testing.T) {
	id := "6f1c2b9e-4d0a-4e0b-9a43-0d7f0e3c1b22"
	for _, p := range []string{`{"taskId":"` + id + `"}`, ` {"taskId":"` + id + `","_meta":{}} `} {
		if got, err := ParseTaskID(json.RawMessage(p)); err != nil || got != id {
			t.Fatalf("ParseTaskID(%s) = %q, %v", p, got, err)
		}
	}
	for _, p := range []string{``, `null`, `[]`, `"x"`, `{}`, `{"taskId":""}`, `{"taskId":1}`, `{"taskId":null}`,
		`{"taskId":["a"]}`, `{"taskId":"` + id + `","taskId":"` + id + `"}`, `{"taskId":"a","taskId":"` + id + `"}`, `{"taskId":"` + strings.Repeat("a", MaxTaskIDLen+1) + `"}`, `{"taskId":"a"`} {
		if _, err := ParseTaskID(json.RawMessage(p)); !errors.Is(err, ErrInvalidParams) || Code(err) != -32602 {
			t.Fatalf("ParseTaskID(%.40s): %v", p, err)
		}
	}
	got, resp, err := ParseUpdate(json.RawMessage(`{"taskId":"` + id + `","inputResponses":{"a":{"action":"accept"},"b":{ }}}`))
	if err != nil || got != id || len(resp) != 2 {
		t.Fatalf("ParseUpdate: %q %v %v", got, resp, err)
	}
	many := make(map[string]any)
	for i := range MaxInputKeys + 1 {
		many[strings.Repeat("k", i+1)] = map[string]any{}
	}
	manyJSON, _ := json.Marshal(map[string]any{"taskId": id, "inputResponses": many})
	for _, p := range []string{
		`{"taskId":"` + id + `"}`,
		`{"taskId":"` + id + `","inputResponses":null}`,
		`{"taskId":"` + id + `","inputResponses":[]}`,
		`{"taskId":"` + id + `","inputResponses":{"a":1}}`,
		`{"taskId":"` + id + `","inputResponses":{"a":null}}`,
		`{"taskId":"` + id + `","inputResponses":{"":{}}}`,
		`{"taskId":"` + id + `","inputResponses":{"a\u0000":{}}}`,
		`{"taskId":"` + id + `","inputResponses":{"` + strings.Repeat("k", MaxKeyLen+1) + `":{}}}`,
		`{"taskId":"` + id + `","inputResponses":{"a":{"x":"` + strings.Repeat("y", MaxInputBytes) + `"}}}`,
		string(manyJSON),
		`{"inputResponses":{}}`,
		`{"taskId":"` + id + `","inputResponses":{"a":{},"a":{"x":1}}}`,
		`{"taskId":"` + id + `","inputResponses":{},"inputResponses":{"a":{}}}`,
	} {
		if _, _, err := ParseUpdate(json.RawMessage(p)); !errors.Is(err, ErrInvalidParams) {
			t.Fatalf("ParseUpdate(%.60s): %v", p, err)
		}
	}
}
