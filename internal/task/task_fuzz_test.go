package task

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/mcphandler/mcphandler/internal/sign"
	"github.com/mcphandler/mcphandler/session"
)

const fuzzID = "6f1c2b9e-4d0a-4e0b-9a43-0d7f0e3c1b22"

// validRecordJSON returns the payload of a valid record of alice.
func validRecordJSON(st Status, extra string) []byte {
	own, ten := alice.digest(), digest("tenant", alice.Tenant)
	now := time.Now().UnixMilli()
	b, _ := json.Marshal(map[string]any{"v": 1, "st": st, "own": own, "ten": ten, "tool": "t", "c": now, "u": now,
		"ttl": 60000, "x": now + 120000, "poll": 1000, "by": "tok", "rev": 1})
	if extra != "" {
		b = append(b[:len(b)-1], ","+extra+"}"...)
	}
	return b
}

// FuzzStoredTask signs arbitrary payloads as a replica would (one with a
// bug, or another version) and feeds them, and the raw bytes unsigned, to
// the code that reads task records and owner indexes: nothing panics, an
// accepted record keeps the invariants its status promises, re-encodes to
// what decodes the same, and serves every method without a malformed
// answer.
func FuzzStoredTask(f *testing.F) {
	f.Add(validRecordJSON(Working, ""), true)
	f.Add(validRecordJSON(InputRequired, `"asked":["a"],"req":{"a":{"method":"elicitation/create"}}`), true)
	f.Add(validRecordJSON(Completed, `"res":{"content":[]}`), true)
	f.Add(validRecordJSON(Failed, `"err":{"code":-32603,"message":"x"}`), true)
	f.Add(validRecordJSON(Cancelled, `"ans":{"a":{}}`), true)
	f.Add([]byte(`{"e":[{"i":"`+fuzzID+`","x":99999999999999}]}`), true)
	f.Add([]byte(`{"v":1,"st":"working"`), false)
	f.Fuzz(func(t *testing.T, payload []byte, signed bool) {
		mem := session.NewMemory()
		m, err := New(Config{Store: mem, Keys: testKeys, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		defer m.close(false)
		ctx := context.Background()
		raw := payload
		if signed {
			raw = m.records.Signer.Sign(taskKey(fuzzID), payload)
		}
		if rec, ok := m.decode(fuzzID, raw); ok {
			checkRecord(t, m, &rec)
		}
		mem.PutIfAbsent(ctx, taskKey(fuzzID), raw, time.Minute)
		for _, o := range []Owner{alice, bob} {
			if d, err := m.Get(ctx, o, fuzzID); err == nil {
				if _, err := json.Marshal(d.Get()); err != nil || !d.Status.valid() || o != alice {
					t.Fatalf("Get by %v of %q: %+v, %v", o, payload, d, err)
				}
			}
			m.Update(ctx, o, fuzzID, map[string]json.RawMessage{"a": json.RawMessage(`{}`)})
			m.Cancel(ctx, o, fuzzID)
		}
		own := alice.digest()
		idx := raw
		if signed {
			owner, _ := sign.NewSigner("task-owner", testKeys...)
			idx = owner.Sign(ownerKey(own), payload)
		}
		mem.PutIfAbsent(ctx, ownerKey(own), idx, time.Minute)
		if _, _, err := m.List(ctx, alice, ""); err != nil {
			t.Fatalf("List over index %q: %v", payload, err)
		}
		if err := m.admit(ctx, own, "7f1c2b9e-4d0a-4e0b-9a43-0d7f0e3c1b22", time.Now().UnixMilli()+1000); err != nil && !errors.Is(err, ErrTooManyTasks) {
			t.Fatalf("admit over index %q: %v", payload, err)
		}
	})
}

// checkRecord checks what an accepted record promises.
func checkRecord(t *testing.T, m *Manager, rec *taskRecord) {
	t.Helper()
	d := rec.detailed(fuzzID)
	switch {
	case rec.St == InputRequired && len(d.InputRequests) == 0,
		rec.St == Completed && !isObject(d.Result),
		rec.St == Failed && (d.Error == nil || d.Error.Message == ""),
		rec.St != Completed && d.Result != nil,
		rec.St != Failed && d.Error != nil:
		t.Fatalf("accepted record breaks its status: %+v", rec)
	}
	if _, err := json.Marshal(d.Get()); err != nil {
		t.Fatalf("view does not encode: %v", err)
	}
	enc := m.encode(fuzzID, rec)
	again, ok := m.decode(fuzzID, enc)
	if !ok {
		t.Fatalf("re-encoded record refused: %s", enc)
	}
	if !bytes.Equal(m.encode(fuzzID, &again), enc) {
		t.Fatalf("re-encoding is not stable")
	}
}

// FuzzParams feeds client bytes to the tasks params parsers: nothing
// panics, and what they accept is within the documented bounds.
func FuzzParams(f *testing.F) {
	f.Add([]byte(`{"taskId":"` + fuzzID + `"}`))
	f.Add([]byte(`{"taskId":"` + fuzzID + `","inputResponses":{"a":{"action":"accept"}}}`))
	f.Add([]byte(`{"taskId":"a","taskId":"b"}`))
	f.Add([]byte(`{"taskId":"a","inputResponses":{"a":{},"a":{}}}`))
	f.Fuzz(func(t *testing.T, params []byte) {
		if id, err := ParseTaskID(params); err == nil {
			if id == "" || len(id) > MaxTaskIDLen {
				t.Fatalf("accepted taskId %q", id)
			}
		} else if !errors.Is(err, ErrInvalidParams) {
			t.Fatalf("error %v does not wrap ErrInvalidParams", err)
		}
		id, resp, err := ParseUpdate(params)
		if err != nil {
			return
		}
		if id == "" || len(resp) > MaxInputKeys {
			t.Fatalf("accepted %q with %d responses", id, len(resp))
		}
		for k, v := range resp {
			if checkKey(k) != nil || len(v) > MaxInputBytes || !isObject(v) {
				t.Fatalf("accepted response %q: %s", k, v)
			}
		}
	})
}
