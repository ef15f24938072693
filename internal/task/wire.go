package task

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/mcphandler/mcphandler/internal/jsonrpc"
)

// The wire shapes of tasks, in the two revisions that have them.
//
// 2026-07-28, the extension io.modelcontextprotocol/tasks (SEP-2663): a
// tools/call may answer with a [CreateTaskResult] (resultType "task", the
// Task fields flat beside it, no nested "task" key); tasks/get answers a
// [GetResult] (resultType "complete" and a [DetailedTask]: inputRequests
// while input_required, result once completed, error once failed);
// tasks/update and tasks/cancel answer an empty [Ack]; notifications/tasks
// carries a DetailedTask. Durations are integer milliseconds named ttlMs
// and pollIntervalMs; requestState never appears.
//
// 2025-11-25, experimental tasks in the core protocol: a tools/call with
// params.task answers {"task": Task} ([CreateTaskResult2025]); tasks/get
// and tasks/cancel answer the Task itself ([Task2025], with ttl and
// pollInterval); tasks/result answers the underlying result with
// _meta[MetaRelatedTask]; tasks/list answers [ListResult2025];
// notifications/tasks/status carries a Task2025.
//
// The names of this package say the revision: a 2025-11-25 shape has the
// suffix 2025, a 2026-07-28 one none.

// ExtensionID names the tasks extension in capabilities.extensions.
const ExtensionID = "io.modelcontextprotocol/tasks"

// Methods and notifications.
const (
	MethodGet          = "tasks/get"
	MethodUpdate       = "tasks/update"
	MethodCancel       = "tasks/cancel"
	NotificationTasks  = "notifications/tasks"        // 2026-07-28
	MethodResult       = "tasks/result"               // 2025-11-25 only
	MethodList         = "tasks/list"                 // 2025-11-25 only
	NotificationStatus = "notifications/tasks/status" // 2025-11-25 only
	// MetaRelatedTask is the _meta key tying a 2025-11-25 message to its
	// task ({"taskId": ...}). It must not appear on a 2026-07-28 inlined
	// result.
	MetaRelatedTask = "io.modelcontextprotocol/related-task"
)

// Result types of 2026-07-28 results.
const (
	ResultTypeTask     = "task"
	ResultTypeComplete = "complete"
)

// Status is the status of a task.
type Status string

// The statuses. completed, failed and cancelled are terminal: a task in one
// of them never changes again. A tool that ran and reported an error
// (isError) is completed; failed means a protocol-level error, or that the
// outcome is unknown because the replica running the task stopped.
const (
	Working       Status = "working"
	InputRequired Status = "input_required"
	Completed     Status = "completed"
	Failed        Status = "failed"
	Cancelled     Status = "cancelled"
)

// Terminal reports whether s is completed, failed or cancelled.
func (s Status) Terminal() bool { return s == Completed || s == Failed || s == Cancelled }

func (s Status) valid() bool { return s == Working || s == InputRequired || s.Terminal() }

// Task is the Task of 2026-07-28: what CreateTaskResult, tasks/get and
// notifications/tasks share. TTLMs is always present (null would mean
// unlimited, which this package never grants).
type Task struct {
	TaskID         string `json:"taskId"`
	Status         Status `json:"status"`
	StatusMessage  string `json:"statusMessage,omitempty"`
	CreatedAt      string `json:"createdAt"`
	LastUpdatedAt  string `json:"lastUpdatedAt"`
	TTLMs          *int64 `json:"ttlMs"`
	PollIntervalMs int64  `json:"pollIntervalMs,omitempty"`
}

// CreateTaskResult is the answer to a tools/call that became a task.
type CreateTaskResult struct {
	ResultType string `json:"resultType"` // ResultTypeTask
	Task
}

// DetailedTask is a Task with what its status carries: InputRequests
// (keyed, each an {"method", "params"} request) while input_required,
// Result (the tool's result, inlined) once completed, Error once failed.
type DetailedTask struct {
	Task
	InputRequests map[string]json.RawMessage `json:"inputRequests,omitempty"`
	Result        json.RawMessage            `json:"result,omitempty"`
	Error         *jsonrpc.Error             `json:"error,omitempty"`
}

// GetResult is the answer to tasks/get.
type GetResult struct {
	ResultType string `json:"resultType"` // ResultTypeComplete
	DetailedTask
}

// Ack is the answer to tasks/update and tasks/cancel in 2026-07-28.
type Ack struct {
	ResultType string `json:"resultType"` // ResultTypeComplete
}

// Created returns the CreateTaskResult of t.
func (t Task) Created() CreateTaskResult {
	return CreateTaskResult{ResultType: ResultTypeTask, Task: t}
}

// Get returns the tasks/get answer of d.
func (d DetailedTask) Get() GetResult {
	return GetResult{ResultType: ResultTypeComplete, DetailedTask: d}
}

// Task2025 is the Task of 2025-11-25: the same fields, with the durations
// named ttl and pollInterval.
type Task2025 struct {
	TaskID        string `json:"taskId"`
	Status        Status `json:"status"`
	StatusMessage string `json:"statusMessage,omitempty"`
	CreatedAt     string `json:"createdAt"`
	LastUpdatedAt string `json:"lastUpdatedAt"`
	TTL           *int64 `json:"ttl"`
	PollInterval  int64  `json:"pollInterval,omitempty"`
}

// CreateTaskResult2025 is the 2025-11-25 answer to a task-augmented call.
type CreateTaskResult2025 struct {
	Task Task2025 `json:"task"`
}

// ListResult2025 is the 2025-11-25 answer to tasks/list.
type ListResult2025 struct {
	Tasks      []Task2025 `json:"tasks"`
	NextCursor string     `json:"nextCursor,omitempty"`
}

// Task2025 returns d in its 2025-11-25 shape. A completed task whose
// result has isError true is failed there (2025-11-25 "tool result with
// isError makes the task failed"; 2026-07-28 keeps it completed).
func (d DetailedTask) Task2025() Task2025 {
	t := d.Task
	if t.Status == Completed && isToolError(d.Result) {
		t.Status = Failed
	}
	return Task2025{TaskID: t.TaskID, Status: t.Status, StatusMessage: t.StatusMessage, CreatedAt: t.CreatedAt,
		LastUpdatedAt: t.LastUpdatedAt, TTL: t.TTLMs, PollInterval: t.PollIntervalMs}
}

// isToolError reports whether a tool result has "isError": true.
func isToolError(result json.RawMessage) bool {
	var r struct {
		IsError bool `json:"isError"`
	}
	return json.Unmarshal(result, &r) == nil && r.IsError
}

// timeFormat is how timestamps go on the wire: ISO 8601, UTC, milliseconds.
const timeFormat = "2006-01-02T15:04:05.000Z"

func wireTime(ms int64) string { return time.UnixMilli(ms).UTC().Format(timeFormat) }

// Bounds of what a client sends to the tasks methods.
const (
	// MaxTaskIDLen bounds a taskId in params; ids this package mints are
	// 36 bytes.
	MaxTaskIDLen = 64
	// MaxKeyLen bounds an input request key.
	MaxKeyLen = 128
	// MaxInputKeys bounds the input requests of one task over its
	// lifetime, and the inputResponses of one tasks/update.
	MaxInputKeys = 64
	// MaxInputBytes bounds one input request and one input response.
	MaxInputBytes = 64 << 10
)

// ErrInvalidParams reports params of a tasks method that are malformed or
// past a bound (code -32602). The message says which.
var ErrInvalidParams = errors.New("task: invalid params")

// ParseTaskID reads the taskId of tasks/get, tasks/cancel or tasks/result
// params: an object whose "taskId" is a non-empty string of at most
// MaxTaskIDLen bytes. Other members are ignored.
func ParseTaskID(params json.RawMessage) (string, error) {
	var p struct {
		TaskID *string `json:"taskId"`
	}
	if err := decodeObject(params, &p); err != nil {
		return "", err
	}
	if p.TaskID == nil || *p.TaskID == "" {
		return "", fmt.Errorf("%w: taskId must be a non-empty string", ErrInvalidParams)
	}
	if len(*p.TaskID) > MaxTaskIDLen {
		return "", fmt.Errorf("%w: taskId is longer than %d bytes", ErrInvalidParams, MaxTaskIDLen)
	}
	return *p.TaskID, nil
}

// ParseUpdate reads tasks/update params: a taskId as ParseTaskID, and
// inputResponses, an object of at most MaxInputKeys members, each key at
// most MaxKeyLen bytes of valid UTF-8 and each value a JSON object of at
// most MaxInputBytes.
func ParseUpdate(params json.RawMessage) (id string, responses map[string]json.RawMessage, err error) {
	if id, err = ParseTaskID(params); err != nil {
		return "", nil, err
	}
	var p struct {
		InputResponses json.RawMessage `json:"inputResponses"`
	}
	if err := decodeObject(params, &p); err != nil {
		return "", nil, err
	}
	if !isObject(p.InputResponses) {
		return "", nil, fmt.Errorf("%w: inputResponses must be an object", ErrInvalidParams)
	}
	if err := noDuplicates(p.InputResponses); err != nil {
		return "", nil, err
	}
	if err := json.Unmarshal(p.InputResponses, &responses); err != nil {
		return "", nil, fmt.Errorf("%w: inputResponses: %v", ErrInvalidParams, err)
	}
	if len(responses) > MaxInputKeys {
		return "", nil, fmt.Errorf("%w: more than %d inputResponses", ErrInvalidParams, MaxInputKeys)
	}
	for k, v := range responses {
		if err := checkKey(k); err != nil {
			return "", nil, fmt.Errorf("%w: %v", ErrInvalidParams, err)
		}
		if len(v) > MaxInputBytes || !isObject(v) {
			return "", nil, fmt.Errorf("%w: inputResponses[%q] must be an object of at most %d bytes", ErrInvalidParams, k, MaxInputBytes)
		}
	}
	return id, responses, nil
}

// decodeObject decodes params, which must be one JSON object without
// duplicate members (which parsers disagree on: the Mcp-Name header must
// be checked against the same taskId the method acts on).
func decodeObject(params json.RawMessage, v any) error {
	if !isObject(params) {
		return fmt.Errorf("%w: params must be an object", ErrInvalidParams)
	}
	if err := noDuplicates(params); err != nil {
		return err
	}
	if err := json.Unmarshal(params, v); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidParams, err)
	}
	return nil
}

// checkKey checks an input request key: non-empty, at most MaxKeyLen
// bytes, valid UTF-8 without control characters.
func checkKey(k string) error {
	if k == "" || len(k) > MaxKeyLen || !utf8.ValidString(k) || strings.ContainsFunc(k, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return fmt.Errorf("input key %q must be 1 to %d bytes of printable UTF-8", k, MaxKeyLen)
	}
	return nil
}

// isObject reports whether b is one valid JSON object (surrounding JSON
// whitespace allowed).
func isObject(b []byte) bool {
	b = bytes.Trim(b, " \t\r\n")
	return len(b) >= 2 && b[0] == '{' && b[len(b)-1] == '}' && json.Valid(b)
}

// noDuplicates reports a member name that appears twice in the JSON
// object obj (nested objects are not looked into).
func noDuplicates(obj []byte) error {
	dec := json.NewDecoder(bytes.NewReader(obj))
	if _, err := dec.Token(); err != nil { // {
		return fmt.Errorf("%w: %v", ErrInvalidParams, err)
	}
	seen := make(map[string]bool)
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return fmt.Errorf("%w: %v", ErrInvalidParams, err)
		}
		k, _ := tok.(string)
		if seen[k] {
			return fmt.Errorf("%w: member %q appears twice", ErrInvalidParams, k)
		}
		seen[k] = true
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return fmt.Errorf("%w: %v", ErrInvalidParams, err)
		}
	}
	return nil
}
