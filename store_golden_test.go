package mcphandler

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcphandler/mcphandler/internal/golden"
	"github.com/mcphandler/mcphandler/internal/jsonrpc"
	"github.com/mcphandler/mcphandler/internal/seal"
	"github.com/mcphandler/mcphandler/internal/sign"
	"github.com/mcphandler/mcphandler/internal/task"
	"github.com/mcphandler/mcphandler/session"
)

// The golden files of testdata/golden hold, byte for byte, what this
// release stores in the session store and publishes to other replicas:
// during a rolling upgrade, replicas of two releases read each other's
// records and messages, so none of these may change without a plan for
// mixed releases. Each case builds its value through the encoder the
// handler uses, from fixed keys, times and ids, and compares it with its
// file; then it decodes the file with the decoder the handler uses and
// checks the fields, so that a later release proves it still reads what
// this one wrote. Where the handler draws a random id or reads the
// clock inside the encoder, the value it wrote is taken from the store
// and only those bytes are replaced by fixed ones (their offsets are
// part of what is pinned), then signed again.
//
// go test -run TestGolden -update rewrites the files: do that only for a
// change that says how mixed releases still interoperate.

// goldenFile compares got with testdata/golden/name (or writes it, with
// -update) and returns the file's bytes.
// The fixed inputs of the golden values.
var (
	goldenKeys = [][]byte{[]byte("mcphandler golden key, 32 bytes!")}
	// goldenNow is when messages are published.
	goldenNow = time.UnixMilli(1_785_231_000_000) // 2026-07-28T09:30:00Z
	// goldenEnd is the deadline and end of life of records: far ahead,
	// so that the loaders, which read the clock, take them.
	goldenEnd    = time.UnixMilli(4_102_444_800_000) // 2100-01-01T00:00:00Z
	goldenWriter = [8]byte{'w', 'r', 'i', 't', 'e', 'r', '0', '1'}

	goldenAlice = Identity{Tenant: "acme", Subject: "alice", Role: "admin"}
	goldenBob   = Identity{Tenant: "acme", Subject: "bob", Role: "viewer"}
)

const (
	goldenSessionRand = "GOLDENSESSIONRANDOMPART234" // rand.Text's shape
	goldenConfirmID   = confirmPrefix + "GOLDENCONFIRMRANDOMPART234"
	goldenNonce       = "GOLDENNONCEXRANDOMPART2345"
	goldenRequestID   = "mcph-GOLDENREQUESTXRANDOMPART2"
	goldenApprovalID  = "GoldenApprovalId012345"
	goldenStreamID    = "p0123456789abcdef"
	goldenTool        = "delete_file"
	goldenArgs        = `{"path":"/srv/docs/readme.md"}`
)

// goldenStore is a memory store, shared as far as the handler can tell
// (so that it publishes cancellations), that keeps what is published.
type goldenStore struct {
	session.Store
	mu   sync.Mutex
	msgs []goldenMsg
}

type goldenMsg struct {
	channel string
	msg     []byte
}

func (s *goldenStore) Publish(ctx context.Context, channel string, msg []byte) (int, error) {
	s.mu.Lock()
	s.msgs = append(s.msgs, goldenMsg{channel, bytes.Clone(msg)})
	s.mu.Unlock()
	return s.Store.Publish(ctx, channel, msg)
}

// published returns the one message published on channel.
func (s *goldenStore) published(t *testing.T, channel string) []byte {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	var out [][]byte
	for _, m := range s.msgs {
		if m.channel == channel {
			out = append(out, m.msg)
		}
	}
	if len(out) != 1 {
		t.Fatalf("%d messages published on %q, want 1 (all: %d)", len(out), channel, len(s.msgs))
	}
	return out[0]
}

func goldenHandler(t *testing.T) (*Handler, *goldenStore) {
	st := &goldenStore{Store: session.NewMemory()}
	h := New(Config{
		Store: st, StateKeys: goldenKeys, Logger: slog.New(slog.DiscardHandler), Authenticate: InsecureAnonymous,
		ListTools: func(context.Context) ([]Tool, error) { return []Tool{{Name: goldenTool}}, nil },
	})
	t.Cleanup(func() { h.Close() })
	return h, st
}

// atGoldenNow signs again, as published at goldenNow, a message the
// handler published on channel just now, after fix rewrote its payload
// (a copy) where it holds random or dated bytes.
func atGoldenNow(t *testing.T, s *sign.Signer, channel string, msg []byte, fix func([]byte)) []byte {
	t.Helper()
	p, err := s.OpenMessage(channel, time.Now(), messageWindow, msg)
	if err != nil {
		t.Fatalf("the message published on %q does not verify: %v", channel, err)
	}
	p = bytes.Clone(p)
	if fix != nil {
		fix(p)
	}
	return s.SignMessage(channel, goldenNow, p)
}

// openGolden verifies a golden message as its receiver does, at goldenNow.
func openGolden(t *testing.T, s *sign.Signer, channel string, b []byte) []byte {
	t.Helper()
	p, err := s.OpenMessage(channel, goldenNow, messageWindow, b)
	if err != nil {
		t.Fatalf("the golden message of %q does not verify: %v", channel, err)
	}
	return p
}

// fixMark makes the writer and the time of the mark that starts p (see
// sequence.go) the golden ones.
func fixMark(t *testing.T, p []byte) {
	t.Helper()
	if m, _ := readMark(p); !m.marked {
		t.Fatalf("%q starts with no writer's mark", p)
	}
	copy(p[1:9], goldenWriter[:])
	copy(p[17:25], (&writerMark{id: goldenWriter}).appendNext(nil, goldenNow)[17:25])
}

// checkMark checks the mark that starts a golden value and returns what
// follows it.
func checkMark(t *testing.T, p []byte, n uint64) []byte {
	t.Helper()
	m, rest := readMark(p)
	if want := (mark{id: goldenWriter, n: n, at: goldenNow.UnixMilli(), marked: true}); m != want {
		t.Errorf("mark %+v, want %+v", m, want)
	}
	return rest
}

func goldenSID(h *Handler) string { return h.sessions.sessionID(goldenSessionRand, goldenAlice) }

// goldenForm is the default confirm form, as the handler stores it.
func goldenForm(t *testing.T) json.RawMessage {
	form, _, _, err := confirmQuestion(&ToolCall{Tool: Tool{Name: goldenTool}, Arguments: []byte(goldenArgs)}, Decision{Kind: DecisionConfirm})
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(form)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// goldenResult is a tool result as the handler encodes it.
func goldenResult(t *testing.T, r *ToolResult) json.RawMessage {
	b, err := r.appendJSON(nil)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The confirm records of 2025 (confirm/<id>) in the states a replica
// that takes the confirm over reads them in.
func goldenConfirmRecords(t *testing.T, h *Handler) map[string]confirmRecord {
	sid := goldenSID(h)
	base := confirmRecord{State: statePending, Session: sid, Owner: goldenAlice.key(), Tool: goldenTool,
		Digest: argsDigest([]byte(goldenArgs)), Deadline: goldenEnd.UnixMilli(),
		Form: goldenForm(t), Expect: map[string]any{confirmField: true},
		recordLife: recordLife{Rev: 1, End: goldenEnd.UnixMilli()}}
	pending := base
	pending.Stream, pending.ReqID, pending.Args = goldenStreamID, json.RawMessage(`7`), json.RawMessage(goldenArgs)
	pending.Task = &confirmTask{TTL: 60000, Tenant: goldenAlice.Tenant, Subject: goldenAlice.Subject}
	answered := pending
	answered.State, answered.Answer, answered.Role = stateAnswered, json.RawMessage(`{"action":"accept","content":{"confirm":true}}`), goldenAlice.Role
	answered.recordLife.Rev = 2
	closed := base
	closed.State, closed.Failed, closed.By, closed.Outcome = stateClosed, true, "GOLDENLEASETOKENRANDOM2345", OutcomeTimedOut
	closed.Approval = goldenApprovalID
	closed.recordLife.Rev = 3
	// What the question showed, for the Audit of the replica that ends it
	// (these members are new: a record without them reads as before).
	asked := pending
	asked.Msg, asked.Asked, asked.ARole = "Allow delete_file to run with path: \"/srv/docs/readme.md\"?", goldenNow.UnixMilli(), goldenAlice.Role
	decided := asked
	decided.State, decided.Answer, decided.Role = stateRunning, answered.Answer, goldenAlice.Role
	decided.By, decided.Decided = "GOLDENLEASETOKENRANDOM2345", goldenNow.Add(time.Second).UnixMilli()
	decided.recordLife.Rev = 3
	return map[string]confirmRecord{"pending": pending, "answered": answered, "closed": closed, "asked": asked, "decided": decided}
}

// The nonce records of 2026-07-28 (nonce/<n>).
func goldenNonceRecords(t *testing.T) map[string]nonceRecord {
	life := func(rev uint64) recordLife { return recordLife{Rev: rev, End: goldenEnd.UnixMilli()} }
	ttl := int64(60000)
	created, err := json.Marshal(task.Task{TaskID: "0b6a3d2e-5f4c-4e1a-9b8d-7c6e5f4a3b2c", Status: task.Working,
		CreatedAt: "2026-07-28T09:30:00Z", LastUpdatedAt: "2026-07-28T09:30:00Z", TTLMs: &ttl, PollIntervalMs: 1000})
	if err != nil {
		t.Fatal(err)
	}
	members := goldenMembers(t)
	return map[string]nonceRecord{
		"pending":  {State: statePending, Round: 1, Approval: goldenApprovalID, recordLife: life(1)},
		"running":  {State: stateRunning, Round: 1, recordLife: life(2)},
		"awaiting": {State: stateAwaiting, Round: 2, Result: append(append([]byte{'{'}, members...), '}'), recordLife: life(3)},
		"closed":   {State: stateClosed, Round: 1, Outcome: OutcomeDeclined, Result: goldenResult(t, ErrorResult("Not run: the user declined "+goldenTool+".")), recordLife: life(2)},
		"done":     {State: stateDone, Round: 2, Outcome: OutcomeConfirmed, Result: goldenResult(t, TextResult("deleted")), recordLife: life(4)},
		"task":     {State: stateDone, Round: 1, Outcome: OutcomeConfirmed, Result: created, Task: true, recordLife: life(3)},
		// What round 1 asked, for the Audit of the retry that decides.
		"asked": {State: statePending, Round: 1, Msg: "Really delete?", Form: goldenForm(t), Asked: goldenNow.UnixMilli(),
			ARole: goldenAlice.Role, recordLife: life(1)},
	}
}

// goldenRounds is the state of a 2026-07-28 confirmed call whose tool
// asked the client a question in its second round.
func goldenRounds(h *Handler) (*request, *rounds) {
	rq := &request{h: h, id: goldenAlice, method: "tools/call"}
	r := &rounds{
		binding: seal.Binding{Subject: goldenAlice.Subject, Tenant: goldenAlice.Tenant, Method: "tools/call", Name: goldenTool},
		args:    []byte(goldenArgs),
		state: statePayload{Prior: map[string]json.RawMessage{"elicit-1": json.RawMessage(`{"action":"accept","content":{"reason":"cleanup"}}`)},
			Nonce: goldenNonce, Round: 2},
	}
	r.order = []string{"elicit-2"}
	r.pending = map[string]inputRequest{"elicit-2": {Method: "elicitation/create",
		Params: json.RawMessage(`{"mode":"form","message":"Really?","requestedSchema":{"type":"object","properties":{}}}`)}}
	return rq, r
}

// goldenToken stands for the sealed requestState in the golden
// input_required members (a sealed token is random; package internal/seal
// pins its format).
const goldenToken = "v1.GOLDEN-REQUEST-STATE"

// goldenMembers are the members of an input_required answer, as a
// confirmed call's nonce record keeps them, with its token replaced.
func goldenMembers(t *testing.T) []byte {
	h, _ := goldenHandler(t)
	rq, r := goldenRounds(h)
	members, err := rq.inputRequiredMembers(r)
	if err != nil {
		t.Fatal(err)
	}
	before, token, ok := bytes.Cut(members, []byte(`"requestState":"`))
	if !ok || !bytes.HasPrefix(token, []byte(seal.Prefix)) {
		t.Fatalf("members %q carry no requestState", members)
	}
	return append(append(before, `"requestState":"`...), goldenToken+`"`...)
}

type goldenCase struct {
	name  string // the file under testdata/golden
	build func(t *testing.T, h *Handler, st *goldenStore) []byte
	check func(t *testing.T, h *Handler, b []byte)
}

// TestGolden pins every record and message of the root package that
// replicas share; see the comment at the top of this file.
func TestGolden(t *testing.T) {
	ctx := context.Background()
	var cases []goldenCase
	for _, state := range []string{"pending", "answered", "closed", "asked", "decided"} {
		cases = append(cases, goldenCase{
			name: "confirm-record-" + state + ".golden",
			build: func(t *testing.T, h *Handler, _ *goldenStore) []byte {
				rec := goldenConfirmRecords(t, h)[state]
				return h.confirms.kinds.confirm.Encode(confirmKey(goldenConfirmID), &rec)
			},
			check: func(t *testing.T, h *Handler, b []byte) {
				h.cfg.Store.PutIfAbsent(ctx, confirmKey(goldenConfirmID), b, time.Minute)
				got, _, err := h.confirms.loadConfirm(ctx, goldenConfirmID)
				if err != nil {
					t.Fatalf("loadConfirm: %v", err)
				}
				if want := goldenConfirmRecords(t, h)[state]; !reflect.DeepEqual(got, want) {
					t.Errorf("read\n%+v\nwant\n%+v", got, want)
				}
			},
		})
	}
	for _, state := range []string{"pending", "running", "awaiting", "closed", "done", "task", "asked"} {
		cases = append(cases, goldenCase{
			name: "nonce-record-" + state + ".golden",
			build: func(t *testing.T, h *Handler, _ *goldenStore) []byte {
				rec := goldenNonceRecords(t)[state]
				return h.confirms.kinds.nonce.Encode(nonceKey(goldenNonce), &rec)
			},
			check: func(t *testing.T, h *Handler, b []byte) {
				h.cfg.Store.PutIfAbsent(ctx, nonceKey(goldenNonce), b, time.Minute)
				got, _, err := h.confirms.loadNonce(ctx, goldenNonce)
				if err != nil {
					t.Fatalf("loadNonce: %v", err)
				}
				if want := goldenNonceRecords(t)[state]; !reflect.DeepEqual(got, want) {
					t.Errorf("read\n%+v\nwant\n%+v", got, want)
				}
			},
		})
	}
	cases = append(cases,
		goldenCase{
			// confirm-of/<session>/<stream>: the confirm id, plain.
			name: "confirm-of.golden",
			build: func(t *testing.T, h *Handler, _ *goldenStore) []byte {
				rec := goldenConfirmRecords(t, h)["pending"]
				rec.recordLife = recordLife{}
				c := &confirmCall{cs: h.confirms, id: goldenConfirmID, rec: rec}
				if err := c.record(ctx); err != nil {
					t.Fatal(err)
				}
				c.ls.Release()
				b, err := h.cfg.Store.Load(ctx, confirmOfKey(rec.Session, rec.Stream))
				if err != nil {
					t.Fatal(err)
				}
				return b
			},
			check: func(t *testing.T, h *Handler, b []byte) {
				if string(b) != goldenConfirmID || !isConfirmID(string(b)) || !validConfirmID(string(b)) {
					t.Errorf("confirm-of names %q, want the confirm id %q", b, goldenConfirmID)
				}
			},
		},
		goldenCase{
			name:  "session-id.golden",
			build: func(t *testing.T, h *Handler, _ *goldenStore) []byte { return []byte(goldenSID(h)) },
			check: func(t *testing.T, h *Handler, b []byte) {
				if sid := string(b); len(sid) != sessionIDLen || !h.sessions.sessionOf(sid, goldenAlice) || h.sessions.sessionOf(sid, goldenBob) {
					t.Errorf("session id %q does not name its owner alone", sid)
				}
			},
		},
		goldenCase{
			name: "keys.golden",
			build: func(t *testing.T, h *Handler, _ *goldenStore) []byte {
				return goldenKeyList(h)
			},
			check: func(t *testing.T, h *Handler, b []byte) {
				got := map[string]string{}
				for line := range strings.Lines(string(b)) {
					name, value, ok := strings.Cut(strings.TrimSuffix(line, "\n"), " = ")
					if !ok {
						t.Fatalf("line %q", line)
					}
					got[name] = value
				}
				sid := goldenSID(h)
				for name, want := range map[string]string{
					"confirm record": "confirm/" + goldenConfirmID, "nonce record": "nonce/" + goldenNonce,
					"event log": "events/" + sid + "/" + goldenStreamID, "session channel": "session/" + sid,
					"cancel channel": "cancel", "notify channel": "notify",
				} {
					if got[name] != want {
						t.Errorf("%s: %q, want %q", name, got[name], want)
					}
				}
				if id, after, ok := parseLastEventID(got["event id"]); !ok || id != goldenStreamID || after != 3 {
					t.Errorf("event id %q reads as %q, %d, %v", got["event id"], id, after, ok)
				}
				if !validStreamID(got["stream id"]) || !validConfirmID(got["confirm id"]) || !validConfirmID(got["nonce"]) {
					t.Error("an id of the golden keys is refused")
				}
			},
		},
	)
	cases = append(cases, goldenEventCases(ctx)...)
	cases = append(cases, goldenIndexCases(ctx)...)
	cases = append(cases, goldenMessageCases(ctx)...)
	cases = append(cases, goldenStateCases()...)
	names := map[string]bool{}
	for _, c := range cases {
		if names[c.name] {
			t.Fatalf("two cases write %s", c.name)
		}
		names[c.name] = true
		t.Run(strings.TrimSuffix(c.name, ".golden"), func(t *testing.T) {
			h, st := goldenHandler(t)
			want := golden.File(t, c.name, c.build(t, h, st))
			h, _ = goldenHandler(t)
			c.check(t, h, want)
		})
	}
	if !golden.Updating() {
		files, _ := filepath.Glob(filepath.Join("testdata", "golden", "*.golden"))
		for _, f := range files {
			if !names[filepath.Base(f)] {
				t.Errorf("%s: no case writes it", f)
			}
		}
	}
}

// goldenKeyList lists the names of the store keys and channels, the ids
// they are made of and the purposes values are signed for.
func goldenKeyList(h *Handler) []byte {
	sid := goldenSID(h)
	var b strings.Builder
	for _, kv := range [][2]string{
		{"identity key", goldenAlice.key()},
		{"identity key, no tenant", Identity{Subject: "alice"}.key()},
		{"session id", sid},
		{"confirm id", goldenConfirmID},
		{"nonce", goldenNonce},
		{"stream id", goldenStreamID},
		{"event id", goldenStreamID + "-3"},
		{"server request id prefix", newRequestID()[:5]},
		{"approval elicitation id", approvalPrefix + goldenApprovalID},
		{"confirm input key", confirmInputKey},
		{"confirm record", confirmKey(goldenConfirmID)},
		{"confirm of a stream", confirmOfKey(sid, goldenStreamID)},
		{"confirm lease", leaseKey(goldenConfirmID)},
		{"nonce record", nonceKey(goldenNonce)},
		{"event log", eventKey(sid, goldenStreamID)},
		{"event logs of a session", eventLogsKey(sid)},
		{"confirms of an identity", confirmOwnerKey(goldenAlice)},
		{"GET stream claim", getStreamKey(sid)},
		{"live events channel", eventChannel(sid, goldenStreamID)},
		{"reply channel", replyChannel(sid, goldenRequestID)},
		{"session channel", sessionChannel(sid)},
		{"cancel channel", cancelChannel},
		{"cancel payload", runKey(sid, json.RawMessage(`7`))},
		{"cancel payload, string id", runKey(sid, json.RawMessage(`"req-7"`))},
		{"notify channel", notifyChannel},
		{"session ended", strconv.Quote(string(sessionEnded))},
		{"purposes", strings.Join([]string{macConfirm, macNonce, macEvent, macReply, macCancel, macNotify, macSession, macSessionID, macEventLogs, macConfirmOwner}, " ")},
	} {
		fmt.Fprintf(&b, "%s = %s\n", kv[0], kv[1])
	}
	return []byte(b.String())
}

// goldenLoggedStream returns a POST stream of the golden session, logged.
func goldenLoggedStream(h *Handler) *stream {
	s := newStream(httptest.NewRecorder(), true, 0)
	s.setLog(h, goldenSID(h))
	s.id = goldenStreamID
	return s
}

var goldenEventMsg = jsonrpc.AppendRequest(nil, nil, "notifications/progress", []byte(`{"progressToken":1,"progress":1,"total":2}`))
var goldenFinalMsg = jsonrpc.AppendResult(nil, json.RawMessage(`7`), []byte(`{"content":[{"type":"text","text":"deleted"}]}`))

// goldenEventCases pin the event log of a POST stream: each entry, as
// stored by the stream that writes it (events/<session>/<stream>), and
// its live copy (live/<session>/<stream>).
func goldenEventCases(ctx context.Context) []goldenCase {
	logged := func(t *testing.T, h *Handler) []session.Event {
		s := goldenLoggedStream(h)
		s.nextSeq(evPriming, nil)
		s.nextSeq(evMessage, goldenEventMsg)
		s.nextSeq(evFinal, goldenFinalMsg)
		evs, err := h.cfg.Store.EventsAfter(ctx, eventKey(goldenSID(h), goldenStreamID), 0)
		if err != nil || len(evs) != 3 {
			t.Fatalf("the log holds %d events (%v), want 3", len(evs), err)
		}
		return evs
	}
	var cases []goldenCase
	for i, kind := range []string{"priming", "message", "final"} {
		cases = append(cases, goldenCase{
			name: "event-" + kind + ".golden",
			build: func(t *testing.T, h *Handler, _ *goldenStore) []byte {
				key := eventKey(goldenSID(h), goldenStreamID)
				p, ok := h.bus.openRecord(h.macs.event, key, logged(t, h)[i].Data)
				if !ok {
					t.Fatal("the logged entry does not verify")
				}
				p = bytes.Clone(p)
				fixMark(t, p)
				return h.macs.event.Sign(key, p)
			},
			check: func(t *testing.T, h *Handler, b []byte) {
				// Resume the log the golden entries make: what a client
				// that resumes after the priming event reads.
				sid := goldenSID(h)
				key := eventKey(sid, goldenStreamID)
				if seq, err := h.cfg.Store.AppendEvent(ctx, key, b, time.Minute); err != nil || seq != 1 {
					t.Fatal(seq, err)
				}
				evs, err := h.sessions.events(ctx, key, 0)
				if err != nil || len(evs) != 1 {
					t.Fatalf("events: %d, %v", len(evs), err)
				}
				rest := checkMark(t, evs[0].Data, uint64(i+1))
				want := [][]byte{{evPriming}, append([]byte{evMessage}, goldenEventMsg...), append([]byte{evFinal}, goldenFinalMsg...)}[i]
				if !bytes.Equal(rest, want) {
					t.Errorf("entry %q, want %q", rest, want)
				}
				w := httptest.NewRecorder()
				rs := &resumed{ss: h.sessions, sw: startSSE(w), key: key, streamID: goldenStreamID}
				final := rs.writeAll(evs)
				if wantFinal := kind == "final"; final != wantFinal {
					t.Errorf("final %v, want %v", final, wantFinal)
				}
				if kind != "priming" {
					if wantSSE := string(appendEvent(nil, []byte(goldenStreamID+"-1"), want[1:])); w.Body.String() != wantSSE {
						t.Errorf("resumed as %q, want %q", w.Body, wantSSE)
					}
				}
			},
		})
	}
	cases = append(cases, goldenCase{
		name: "event-live.golden",
		build: func(t *testing.T, h *Handler, st *goldenStore) []byte {
			s := goldenLoggedStream(h)
			s.nextSeq(evMessage, goldenEventMsg)
			channel := eventChannel(goldenSID(h), goldenStreamID)
			return atGoldenNow(t, h.macs.event, channel, st.published(t, channel), func(p []byte) {
				seq, entry, _ := bytes.Cut(p, []byte{' '})
				if string(seq) != "1" {
					t.Fatalf("live copy %q", p)
				}
				fixMark(t, entry)
			})
		},
		check: func(t *testing.T, h *Handler, b []byte) {
			channel := eventChannel(goldenSID(h), goldenStreamID)
			p := openGolden(t, h.macs.event, channel, b)
			seq, entry, ok := bytes.Cut(p, []byte{' '})
			if !ok || string(seq) != "1" {
				t.Fatalf("live copy %q", p)
			}
			if rest := checkMark(t, entry, 1); !bytes.Equal(rest, append([]byte{evMessage}, goldenEventMsg...)) {
				t.Errorf("entry %q", rest)
			}
			w := httptest.NewRecorder()
			rs := &resumed{ss: h.sessions, sw: startSSE(w), channel: channel, streamID: goldenStreamID}
			if final, ok := rs.write(1, entry); final || !ok {
				t.Errorf("write: final %v, ok %v", final, ok)
			}
			if want := string(appendEvent(nil, []byte(goldenStreamID+"-1"), goldenEventMsg)); w.Body.String() != want {
				t.Errorf("sent %q, want %q", w.Body, want)
			}
		},
	})
	return cases
}

// goldenIndexCases pin the per-identity and per-session indexes of the
// root package (package internal/ownerindex keeps them).
func goldenIndexCases(ctx context.Context) []goldenCase {
	confirmEntries := []string{goldenConfirmID, goldenNonce}
	return []goldenCase{
		{
			name: "event-logs-index.golden",
			build: func(t *testing.T, h *Handler, _ *goldenStore) []byte {
				key := eventLogsKey(goldenSID(h))
				if err := h.streamLogs.Admit(ctx, key, goldenStreamID, goldenEnd.UnixMilli(), nil); err != nil {
					t.Fatal(err)
				}
				b, err := h.cfg.Store.Load(ctx, key)
				if err != nil {
					t.Fatal(err)
				}
				return b
			},
			check: func(t *testing.T, h *Handler, b []byte) {
				key := eventLogsKey(goldenSID(h))
				h.cfg.Store.PutIfAbsent(ctx, key, b, time.Minute)
				live, err := h.streamLogs.Live(ctx, key)
				if err != nil || len(live) != 1 || live[0].ID != goldenStreamID || live[0].Until != goldenEnd.UnixMilli() {
					t.Errorf("Live: %+v, %v", live, err)
				}
			},
		},
		{
			name: "confirm-owner-index.golden",
			build: func(t *testing.T, h *Handler, _ *goldenStore) []byte {
				key := confirmOwnerKey(goldenAlice)
				for _, id := range confirmEntries {
					if err := h.confirms.owners.Admit(ctx, key, id, goldenEnd.UnixMilli(), nil); err != nil {
						t.Fatal(err)
					}
				}
				b, err := h.cfg.Store.Load(ctx, key)
				if err != nil {
					t.Fatal(err)
				}
				return b
			},
			check: func(t *testing.T, h *Handler, b []byte) {
				key := confirmOwnerKey(goldenAlice)
				h.cfg.Store.PutIfAbsent(ctx, key, b, time.Minute)
				live, err := h.confirms.owners.Live(ctx, key)
				if err != nil || len(live) != len(confirmEntries) {
					t.Fatalf("Live: %+v, %v", live, err)
				}
				for i, e := range live {
					if e.ID != confirmEntries[i] || e.Until != goldenEnd.UnixMilli() {
						t.Errorf("entry %d: %+v", i, e)
					}
				}
			},
		},
	}
}

// goldenMessageCases pin the messages published between replicas.
func goldenMessageCases(ctx context.Context) []goldenCase {
	msgCase := func(name string, channel func(h *Handler) string, signer func(h *Handler) *sign.Signer,
		publish func(t *testing.T, h *Handler), fix func(t *testing.T, p []byte), check func(t *testing.T, h *Handler, p []byte)) goldenCase {
		return goldenCase{
			name: name,
			build: func(t *testing.T, h *Handler, st *goldenStore) []byte {
				publish(t, h)
				ch := channel(h)
				return atGoldenNow(t, signer(h), ch, st.published(t, ch), func(p []byte) {
					if fix != nil {
						fix(t, p)
					}
				})
			},
			check: func(t *testing.T, h *Handler, b []byte) { check(t, h, openGolden(t, signer(h), channel(h), b)) },
		}
	}
	replyCh := func(id string) func(h *Handler) string {
		return func(h *Handler) string { return replyChannel(goldenSID(h), id) }
	}
	replySigner := func(h *Handler) *sign.Signer { return h.macs.reply }
	// deliver publishes the client's response m as the replica that
	// received it does.
	deliver := func(id string, m *jsonrpc.Message) func(t *testing.T, h *Handler) {
		return func(t *testing.T, h *Handler) {
			m.ID = jsonrpc.AppendString(nil, id)
			rq := &request{h: h, base: ctx, id: goldenAlice, sess: &session.Session{ID: goldenSID(h)}}
			h.sessions.deliverResponse(rq, m) // nobody waits: errNotWaiting, once published
		}
	}
	// readReply decodes an answer as the waiting Exchange does.
	readReply := func(t *testing.T, p []byte) (reply, jsonrpc.Message) {
		var r reply
		var m jsonrpc.Message
		if err := json.Unmarshal(p, &r); err != nil {
			t.Fatal(err)
		}
		if err := jsonrpc.Decode(r.Msg, &m); err != nil {
			t.Fatal(err)
		}
		return r, m
	}
	answer := json.RawMessage(`{"action":"accept","content":{"name":"readme"}}`)
	legacyMsg := jsonrpc.AppendRequest(nil, []byte(`"mcph-GOLDENREQUESTXRANDOMPART2"`), "elicitation/create", []byte(`{"message":"Name?","requestedSchema":{"type":"object","properties":{}}}`))
	return []goldenCase{
		msgCase("reply-answer.golden", replyCh(goldenRequestID), replySigner,
			deliver(goldenRequestID, &jsonrpc.Message{Result: answer}), nil,
			func(t *testing.T, h *Handler, p []byte) {
				r, m := readReply(t, p)
				if r.Role != goldenAlice.Role || string(m.ID) != strconv.Quote(goldenRequestID) || !bytes.Equal(m.Result, answer) || m.Error != nil {
					t.Errorf("reply %+v, message %+v", r, m)
				}
			}),
		msgCase("reply-error.golden", replyCh(goldenRequestID), replySigner,
			deliver(goldenRequestID, &jsonrpc.Message{Error: &jsonrpc.Error{Code: -32042, Message: "User rejected the request"}}), nil,
			func(t *testing.T, h *Handler, p []byte) {
				r, m := readReply(t, p)
				if r.Role != goldenAlice.Role || m.Error == nil || m.Error.Code != -32042 || m.Error.Message != "User rejected the request" {
					t.Errorf("reply %+v, message %+v", r, m)
				}
			}),
		msgCase("reply-approval-answer.golden", replyCh(approvalPrefix+goldenApprovalID), replySigner,
			deliver(approvalPrefix+goldenApprovalID, &jsonrpc.Message{Result: json.RawMessage(`{"action":"decline"}`)}), nil,
			func(t *testing.T, h *Handler, p []byte) {
				if !refusedToOpen(p) {
					t.Error("a declined approval page reads as opened")
				}
				if _, m := readReply(t, p); string(m.Result) != `{"action":"decline"}` {
					t.Errorf("result %s", m.Result)
				}
			}),
		msgCase("reply-confirm-hint.golden", replyCh(goldenConfirmID), replySigner,
			func(t *testing.T, h *Handler) {
				rec := goldenConfirmRecords(t, h)["pending"]
				rec.Stream, rec.ReqID, rec.Args, rec.Task = "", nil, nil, nil
				if _, err := h.confirms.createConfirm(ctx, goldenConfirmID, &rec); err != nil {
					t.Fatal(err)
				}
				rq := &request{h: h, base: ctx, id: goldenAlice, sess: &session.Session{ID: rec.Session}}
				m := &jsonrpc.Message{ID: jsonrpc.AppendString(nil, goldenConfirmID), Result: json.RawMessage(`{"action":"accept","content":{"confirm":true}}`)}
				if err := h.confirms.answerConfirm(rq, goldenConfirmID, m); err != nil {
					t.Fatal(err)
				}
			}, nil,
			func(t *testing.T, h *Handler, p []byte) {
				var r reply
				if err := json.Unmarshal(p, &r); err != nil || r.Role != goldenAlice.Role || r.Msg != nil {
					t.Errorf("hint %+v, %v", r, err)
				}
			}),
		msgCase("cancel.golden", func(*Handler) string { return cancelChannel }, func(h *Handler) *sign.Signer { return h.macs.cancel },
			func(t *testing.T, h *Handler) { h.bus.cancel(ctx, runKey(goldenSID(h), json.RawMessage(`7`))) }, nil,
			func(t *testing.T, h *Handler, p []byte) {
				// The replica running the request cancels the one of this key.
				cancelled := false
				h.bus.running[runKey(goldenSID(h), json.RawMessage(`7`))] = running{func() { cancelled = true }, newStream(httptest.NewRecorder(), false, 0)}
				if !h.bus.cancelLocal(string(p)) || !cancelled {
					t.Errorf("%q cancels nothing", p)
				}
			}),
		msgCase("notify-tools.golden", func(*Handler) string { return notifyChannel }, func(h *Handler) *sign.Signer { return h.macs.notify },
			func(t *testing.T, h *Handler) { h.NotifyToolsChanged(ctx, TenantOf("acme")) }, nil,
			func(t *testing.T, h *Handler, p []byte) {
				var c change
				if err := json.Unmarshal(p, &c); err != nil {
					t.Fatal(err)
				}
				if want := `{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`; string(changeMessage(&c, goldenAlice, nil)) != want {
					t.Errorf("change %+v sends %q, want %q", c, changeMessage(&c, goldenAlice, nil), want)
				}
				if changeMessage(&c, Identity{Tenant: "globex", Subject: "alice"}, nil) != nil {
					t.Error("sent to another tenant")
				}
			}),
		msgCase("notify-resource.golden", func(*Handler) string { return notifyChannel }, func(h *Handler) *sign.Signer { return h.macs.notify },
			func(t *testing.T, h *Handler) {
				h.NotifyResourceUpdated(ctx, "file:///srv/docs/readme.md", Target{Tenant: "acme", Subject: "alice"})
			}, nil,
			func(t *testing.T, h *Handler, p []byte) {
				var c change
				if err := json.Unmarshal(p, &c); err != nil {
					t.Fatal(err)
				}
				subscribed := func(uri string) bool { return uri == "file:///srv/docs/readme.md" }
				want := `{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"file:///srv/docs/readme.md"}}`
				if got := changeMessage(&c, goldenAlice, subscribed); string(got) != want {
					t.Errorf("change %+v sends %q, want %q", c, got, want)
				}
				if changeMessage(&c, goldenBob, subscribed) != nil {
					t.Error("sent to another subject")
				}
			}),
		msgCase("session-message.golden", func(h *Handler) string { return sessionChannel(goldenSID(h)) }, func(h *Handler) *sign.Signer { return h.macs.session },
			func(t *testing.T, h *Handler) {
				var w writerMark
				h.bus.publishSession(ctx, goldenSID(h), &w, legacyMsg)
			}, fixMark,
			func(t *testing.T, h *Handler, p []byte) {
				if rest := checkMark(t, p, 1); !bytes.Equal(rest, legacyMsg) {
					t.Errorf("message %q, want %q", rest, legacyMsg)
				}
				var order msgOrder
				m, _ := readMark(p)
				if !order.take(m, goldenNow) || order.take(m, goldenNow) {
					t.Error("the message is not taken once")
				}
			}),
		msgCase("session-ended.golden", func(h *Handler) string { return sessionChannel(goldenSID(h)) }, func(h *Handler) *sign.Signer { return h.macs.session },
			func(t *testing.T, h *Handler) { h.bus.publishSession(ctx, goldenSID(h), nil, sessionEnded) }, nil,
			func(t *testing.T, h *Handler, p []byte) {
				if m, rest := readMark(p); m.marked || !bytes.Equal(rest, sessionEnded) {
					t.Errorf("%q does not end the session's streams", p)
				}
			}),
	}
}

// goldenStateCases pin what a 2026-07-28 requestState carries, sealed
// (package internal/seal pins the sealing), and the members of an
// input_required answer a nonce record keeps.
func goldenStateCases() []goldenCase {
	return []goldenCase{
		{
			name:  "input-required-members.golden",
			build: func(t *testing.T, h *Handler, _ *goldenStore) []byte { return goldenMembers(t) },
			check: func(t *testing.T, h *Handler, b []byte) {
				var m struct {
					InputRequests map[string]inputRequest `json:"inputRequests"`
					RequestState  string                  `json:"requestState"`
				}
				if err := json.Unmarshal(append(append([]byte{'{'}, b...), '}'), &m); err != nil {
					t.Fatal(err)
				}
				_, r := goldenRounds(h)
				if !reflect.DeepEqual(m.InputRequests, r.pending) || m.RequestState != goldenToken {
					t.Errorf("members %+v", m)
				}
			},
		},
		{
			name: "request-state-payload.golden",
			build: func(t *testing.T, h *Handler, _ *goldenStore) []byte {
				rq, r := goldenRounds(h)
				members, err := rq.inputRequiredMembers(r)
				if err != nil {
					t.Fatal(err)
				}
				var m struct {
					RequestState string `json:"requestState"`
				}
				if err := json.Unmarshal(append(append([]byte{'{'}, members...), '}'), &m); err != nil {
					t.Fatal(err)
				}
				b, err := r.bind()
				if err != nil {
					t.Fatal(err)
				}
				p, err := h.keys.Open(m.RequestState, b, time.Now())
				if err != nil {
					t.Fatal(err)
				}
				return p
			},
			check: func(t *testing.T, h *Handler, b []byte) {
				// The retry of the client on any replica opens it.
				rq, want := goldenRounds(h)
				bind, err := want.bind()
				if err != nil {
					t.Fatal(err)
				}
				token, err := h.keys.Seal(bind, b, goldenEnd)
				if err != nil {
					t.Fatal(err)
				}
				params, _ := json.Marshal(map[string]any{"name": goldenTool, "arguments": json.RawMessage(goldenArgs), "requestState": token,
					"inputResponses": map[string]json.RawMessage{"elicit-2": json.RawMessage(`{"action":"accept","content":{}}`)}})
				r, e := rq.newRounds(params, goldenTool, []byte(goldenArgs))
				if e != nil {
					t.Fatal(e)
				}
				wantState := statePayload{Asked: want.order, Prior: want.state.Prior, Nonce: goldenNonce, Round: 2}
				if !reflect.DeepEqual(r.state, wantState) {
					t.Errorf("state %+v, want %+v", r.state, wantState)
				}
				if a, err := r.ask("elicit-2", "elicitation/create", nil); err != nil || string(a) != `{"action":"accept","content":{}}` {
					t.Errorf("the answer to the asked key: %s, %v", a, err)
				}
			},
		},
	}
}
