package task

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"maps"
	"slices"
	"strings"

	"github.com/google/uuid"
	"github.com/mcphandler/mcphandler/internal/jsonrpc"
	"github.com/mcphandler/mcphandler/internal/record"
)

// A task is one record in the store, task/<id>, signed (purpose "task")
// and kept by package internal/record like every record that carries a
// decision. Every change of state is one CompareAndSwap from the exact
// bytes read, and every write increments Rev, so of replicas racing for a
// transition exactly one wins and the others read what it decided.
//
//	    ┌──────────────► completed ◄─────────┐
//	    │ ┌────────────► failed    ◄───────┐ │
//	    │ │ ┌──────────► cancelled ◄─────┐ │ │
//	    │ │ │                            │ │ │
//	working ──(runner asks)──► input_required
//	    ▲                            │
//	    └──(client answered every key)┘
//
// Who makes which transition:
//   - working → input_required: the runner (RequestInput);
//     input_required → working: the tasks/update that answers the last
//     pending key, on any replica.
//   - → completed | failed: the runner (Complete, Fail); → failed also any
//     replica that reads the task and finds the runner's lease lapsed or
//     the task past its TTL (the outcome is unknown).
//   - → cancelled: tasks/cancel, on any replica.
//   - working → working and input_required → input_required: a new status
//     message, the runner taking its answers, a partial answer.
//
// Nothing ever leaves a terminal status.
type taskRecord struct {
	V     int      `json:"v"` // recordVersion
	St    Status   `json:"st"`
	Own   string   `json:"own"`  // ownerDigest of tenant and subject
	Ten   string   `json:"ten"`  // tenantDigest, the status channel
	Tool  string   `json:"tool"` // the tool called
	C     int64    `json:"c"`    // created, unix ms
	U     int64    `json:"u"`    // last transition, unix ms
	TTL   int64    `json:"ttl"`  // ms, reported as ttlMs
	Exp   int64    `json:"x"`    // unix ms: gone from then on
	Poll  int64    `json:"poll"` // ms, reported as pollIntervalMs
	Msg   string   `json:"msg,omitempty"`
	By    string   `json:"by"`              // the runner's lease token
	Rev   uint64   `json:"rev"`             // incremented by every write
	Asked []string `json:"asked,omitempty"` // every key ever asked, in order

	Req map[string]json.RawMessage `json:"req,omitempty"` // pending input requests
	Ans map[string]json.RawMessage `json:"ans,omitempty"` // answers the runner has not taken
	Res json.RawMessage            `json:"res,omitempty"` // completed: the tool result
	Err *jsonrpc.Error             `json:"err,omitempty"` // failed: why
}

const recordVersion = 1

// maxMessageLen bounds a status message.
const maxMessageLen = 1024

// moves lists the transitions; anything else is refused.
var moves = map[Status][]Status{
	Working:       {Working, InputRequired, Completed, Failed, Cancelled},
	InputRequired: {InputRequired, Working, Completed, Failed, Cancelled},
}

func canMove(from, to Status) bool { return slices.Contains(moves[from], to) }

func taskKey(id string) string  { return "task/" + id }
func leaseKey(id string) string { return "task-lease/" + id }
func ownerKey(own string) string {
	return "task-owner/" + own
}

// digest hashes the length-prefixed parts under a label, so that no two
// different (tenant, subject) pairs share a digest.
func digest(label string, parts ...string) string {
	h := sha256.New()
	h.Write([]byte("mcphandler/task/" + label + "\x00"))
	for _, p := range parts {
		h.Write(binary.AppendUvarint(nil, uint64(len(p))))
		h.Write([]byte(p))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Owner is the identity a task is bound to: only requests of the same
// tenant and subject see it; to any other, its id answers exactly like an
// unknown one.
type Owner struct {
	Tenant, Subject string
}

func (o Owner) digest() string  { return digest("owner", o.Tenant, o.Subject) }
func (o Owner) channel() string { return tenantChannel(digest("tenant", o.Tenant)) }

func tenantChannel(ten string) string { return "task-status/" + ten[:32] }

// validID reports whether id is what New mints: a canonical lower-case
// UUID, version 4.
func validID(id string) bool {
	u, err := uuid.Parse(id)
	return err == nil && u.Version() == 4 && u.Variant() == uuid.RFC4122 && u.String() == id
}

func isDigest(s string) bool {
	b, err := hex.DecodeString(s)
	return err == nil && len(b) == sha256.Size && strings.ToLower(s) == s
}

// Valid checks a decoded record like client input: a record that fails is
// treated as absent.
func (r *taskRecord) Valid() bool {
	if r.V != recordVersion || !r.St.valid() || !isDigest(r.Own) || !isDigest(r.Ten) || r.Tool == "" || len(r.Tool) > 256 {
		return false
	}
	if r.C <= 0 || r.U < r.C || r.TTL <= 0 || r.Exp <= r.C || r.Poll < 0 || len(r.Msg) > maxMessageLen || r.By == "" || len(r.By) > 64 {
		return false
	}
	if len(r.Asked) > MaxInputKeys || !r.keysValid() {
		return false
	}
	switch r.St {
	case InputRequired:
		if len(r.Req) == 0 {
			return false
		}
	case Completed:
		if !isObject(r.Res) {
			return false
		}
	case Failed:
		if r.Err == nil || r.Err.Message == "" {
			return false
		}
	}
	return (r.St == InputRequired || len(r.Req) == 0) && (r.St == Completed || r.Res == nil) && (r.St == Failed || r.Err == nil)
}

// Life is the record's revision and expiry, as package record keeps them.
func (r *taskRecord) Life() record.Life { return record.Life{Rev: r.Rev, End: r.Exp} }

// SetLife sets the record's revision and expiry.
func (r *taskRecord) SetLife(l record.Life) { r.Rev, r.Exp = l.Rev, l.End }

// keysValid checks that the asked keys are distinct and valid, and that
// every pending request and unread answer is under an asked key.
func (r *taskRecord) keysValid() bool {
	seen := make(map[string]bool, len(r.Asked))
	for _, k := range r.Asked {
		if checkKey(k) != nil || seen[k] {
			return false
		}
		seen[k] = true
	}
	for _, m := range []map[string]json.RawMessage{r.Req, r.Ans} {
		for k, v := range m {
			if !seen[k] || len(v) > MaxInputBytes || !isObject(v) {
				return false
			}
		}
	}
	for k := range r.Req {
		if _, ok := r.Ans[k]; ok {
			return false
		}
	}
	return true
}

// clone returns a copy of r that shares nothing mutable with it.
func (r *taskRecord) clone() taskRecord {
	c := *r
	c.Asked = slices.Clone(r.Asked)
	c.Req = maps.Clone(r.Req)
	c.Ans = maps.Clone(r.Ans)
	if r.Err != nil {
		e := *r.Err
		c.Err = &e
	}
	return c
}

// detailed returns the wire view of the task.
func (r *taskRecord) detailed(id string) DetailedTask {
	ttl := r.TTL
	d := DetailedTask{Task: Task{TaskID: id, Status: r.St, StatusMessage: r.Msg, CreatedAt: wireTime(r.C),
		LastUpdatedAt: wireTime(r.U), TTLMs: &ttl, PollIntervalMs: r.Poll}}
	switch r.St {
	case InputRequired:
		d.InputRequests = maps.Clone(r.Req)
	case Completed:
		d.Result = slices.Clone(r.Res)
	case Failed:
		e := *r.Err
		d.Error = &e
	}
	return d
}
