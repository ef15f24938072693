package mcphandler

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/mcphandler/mcphandler/elicitation"
	"github.com/mcphandler/mcphandler/internal/jsonrpc"
)

// Every transition the confirm machinery makes is in confirmMoves, and
// nothing leaves a final state.
func TestConfirmMoves(t *testing.T) {
	all := []confirmState{statePending, stateAnswered, stateRunning, stateAwaiting, stateClosed, stateDone, stateUnknown}
	final := map[confirmState]bool{stateClosed: true, stateDone: true, stateUnknown: true}
	for _, from := range all {
		for _, to := range all {
			if final[from] && from.canMove(to) {
				t.Errorf("%s → %s: a final state moved", from, to)
			}
			if from == to && from.canMove(to) {
				t.Errorf("%s → %s: a transition that changes nothing", from, to)
			}
		}
	}
	if confirmState("running ").valid() || confirmState("").valid() {
		t.Error("an unknown state is valid")
	}
}

// FuzzStoredRecords signs arbitrary payloads as a replica would (a replica
// with a bug, or an older version) and feeds them to the code that reads
// confirm and nonce records: nothing panics, and a nonce record that is
// accepted answers a retry with one well-formed JSON-RPC message.
func FuzzStoredRecords(f *testing.F) {
	f.Add([]byte(`{"st":"done","n":1,"r":{"content":[]}}`))
	f.Add([]byte(`{"st":"awaiting","n":2,"r":{"inputRequests":{},"requestState":"x"}}`))
	f.Add([]byte(`{"st":"closed","n":1,"r":1}`))
	f.Add([]byte(`{"st":"answered","sid":"s","own":"o","tool":"t","args":"` + argsDigest(nil) + `","dl":1,"form":{"type":"object","properties":{}},"ans":{"action":"accept"}}`))
	f.Add([]byte(`{"st":"pending","sid":"s","own":"o","tool":"t","args":"00","dl":1,"stream":"p1","req":1,"argv":{},"form":{}}`))
	f.Add([]byte(`{"st":"answered","sid":"s","own":"4:acme/alice","tool":"t","args":"` + argsDigest(nil) + `","dl":1,"form":{"type":"object","properties":{}},"ans":{"action":"accept"},"task":{"ttl":5000,"tn":"acme","sub":"alice"}}`))
	// With a revision and an end of life far ahead (a record past its end
	// reads as absent, and "dl":1 implies one long past).
	f.Add([]byte(`{"st":"answered","sid":"s","own":"o","tool":"t","args":"` + argsDigest(nil) + `","dl":1,"form":{"type":"object","properties":{}},"ans":{"action":"accept","content":{"confirm":true}},"expect":{"confirm":true},"rev":2,"x":32503680000000}`))
	f.Add([]byte(`{"st":"done","n":1,"r":{"content":[]},"rev":4,"x":32503680000000}`))
	f.Fuzz(func(t *testing.T, payload []byte) {
		h := New(Config{Logger: slog.New(slog.DiscardHandler), ListTools: func(context.Context) ([]Tool, error) { return []Tool{{Name: "t"}}, nil }})
		ctx := context.Background()
		st := h.cfg.Store
		st.PutIfAbsent(ctx, nonceKey("n"), h.macs.nonce.Sign(nonceKey("n"), payload), time.Minute)
		if rec, _, err := h.confirms.loadNonce(ctx, "n"); err == nil {
			for _, round := range []int{0, 1, rec.Round - 1, rec.Round} {
				w := httptest.NewRecorder()
				rq := &request{h: h, r: httptest.NewRequest("POST", "/", nil), st: newStream(w, false, 0), era: eraStateless, method: "tools/call"}
				rq.ctx = ctx
				h.confirms.replayNonce(rq, &jsonrpc.Message{ID: json.RawMessage("1")}, rec, round, &CallEvent{})
				var m jsonrpc.Message
				if err := jsonrpc.Decode(w.Body.Bytes(), &m); err != nil {
					t.Fatalf("record %q, round %d: answer %q: %v", payload, round, w.Body, err)
				}
			}
		}
		st.PutIfAbsent(ctx, confirmKey("c"), h.macs.confirm.Sign(confirmKey("c"), payload), time.Minute)
		if rec, _, err := h.confirms.loadConfirm(ctx, "c"); err == nil {
			c := &confirmCall{cs: h.confirms, id: "c", tool: rec.Tool, expect: rec.Expect}
			if c.form, err = elicitation.Parse(rec.Form); err != nil {
				t.Fatalf("a valid record's form does not parse: %v", err)
			}
			c.judge(ctx, &rec)
		}
	})
}

// The task request a confirm record carries is checked like the rest of
// the record: even signed with the replicas' key, a negative or huge ttl,
// or an owner other than the record's, makes the record read as invalid,
// so no replica takes the call over; a good one gives the task slot the
// asker would have used.
func TestConfirmRecordTaskRequest(t *testing.T) {
	h := New(Config{Logger: slog.New(slog.DiscardHandler), ListTools: func(context.Context) ([]Tool, error) { return nil, nil }})
	defer h.Close()
	ctx := context.Background()
	base := confirmRecord{State: stateAnswered, Session: "s", Owner: Identity{Tenant: "acme", Subject: "alice"}.key(), Tool: "t",
		Digest: argsDigest(nil), Deadline: time.Now().Add(time.Minute).UnixMilli(), Form: json.RawMessage(`{"type":"object","properties":{}}`),
		Answer: json.RawMessage(`{"action":"accept"}`)}
	bad := map[string]confirmTask{
		"negative ttl":  {TTL: -1, Tenant: "acme", Subject: "alice"},
		"huge ttl":      {TTL: 1<<53 + 1, Tenant: "acme", Subject: "alice"},
		"other subject": {TTL: 5000, Tenant: "acme", Subject: "bob"},
		"other tenant":  {TTL: 5000, Tenant: "globex", Subject: "alice"},
		"no owner":      {TTL: 5000},
		"split owner":   {TTL: 5000, Tenant: "acme/alice"},
	}
	for name, tk := range bad {
		rec := base
		rec.Task = &tk
		id := confirmPrefix + name
		h.cfg.Store.PutIfAbsent(ctx, confirmKey(id), h.confirms.kinds.confirm.Encode(confirmKey(id), &rec), time.Minute)
		if _, _, err := h.confirms.loadConfirm(ctx, id); err != errBadRecord {
			t.Errorf("%s: %v, want errBadRecord", name, err)
		}
	}
	rec := base
	rec.Task = &confirmTask{TTL: 5000, Tenant: "acme", Subject: "alice"}
	h.cfg.Store.PutIfAbsent(ctx, confirmKey("good"), h.confirms.kinds.confirm.Encode(confirmKey("good"), &rec), time.Minute)
	got, _, err := h.confirms.loadConfirm(ctx, "good")
	if err != nil {
		t.Fatal(err)
	}
	s := got.slot(Tool{Name: "t", TaskSupport: TaskOptional})
	if s == nil || !s.sessions || s.ttl != 5*time.Second || s.owner.Tenant != "acme" || s.owner.Subject != "alice" {
		t.Fatalf("slot %+v", s)
	}
	if got.slot(Tool{Name: "t"}) != nil {
		t.Fatal("a tool without task support got a task slot")
	}
	base.Task = nil
	if base.slot(Tool{Name: "t", TaskSupport: TaskOptional}) != nil {
		t.Fatal("a call without params.task got a task slot")
	}
}
