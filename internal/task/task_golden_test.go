package task

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/mcphandler/mcphandler/internal/golden"
	"github.com/mcphandler/mcphandler/internal/jsonrpc"
	"github.com/mcphandler/mcphandler/internal/sign"
	"github.com/mcphandler/mcphandler/session"
)

// The golden files of testdata/golden hold, byte for byte, what a
// Manager stores and publishes: replicas of two releases read each
// other's during a rolling upgrade. Each case builds its value through
// the Manager's encoder from fixed keys, times and ids, compares it with
// its file, then reads the file back as a Manager does. A message the
// Manager dates with the clock (signals, status changes) is taken as
// published and signed again at the golden time.
//
// go test -run TestGolden -update rewrites the files: only for a change
// that says how mixed releases still interoperate.

var (
	goldenKeys = [][]byte{[]byte("mcphandler golden key, 32 bytes!")}
	goldenNow  = time.UnixMilli(1_785_231_000_000) // 2026-07-28T09:30:00Z
)

const (
	goldenID    = "0b6a3d2e-5f4c-4e1a-9b8d-7c6e5f4a3b2c"
	goldenID2   = "5d1f0e9c-8b7a-4c6d-a5e4-f3d2c1b0a998"
	goldenToken = "GOLDENLEASETOKENRANDOM2345"
)

func goldenManager(t *testing.T) (*Manager, *recording) {
	st := &recording{Store: session.NewMemory()}
	m, err := New(Config{Store: st, Keys: goldenKeys, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		now: func() time.Time { return goldenNow }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.close(false) })
	return m, st
}

// goldenRecords are a task of alice's in each status.
func goldenRecords(m *Manager) map[string]taskRecord {
	now := goldenNow.UnixMilli()
	working := taskRecord{V: recordVersion, St: Working, Own: alice.digest(), Ten: digest("tenant", alice.Tenant), Tool: "export_docs",
		C: now, U: now, TTL: time.Hour.Milliseconds(), Poll: time.Second.Milliseconds(), By: goldenToken, Rev: 1}
	working.Exp = m.expiry(&working)
	input := working
	input.St, input.Msg, input.Rev, input.U = InputRequired, "waiting for the user", 2, now+1000
	input.Asked = []string{"elicit-1", "elicit-2"}
	input.Req = map[string]json.RawMessage{"elicit-2": json.RawMessage(`{"method":"elicitation/create","params":{"mode":"form","message":"Which format?","requestedSchema":{"type":"object","properties":{"format":{"type":"string"}}}}}`)}
	input.Ans = map[string]json.RawMessage{"elicit-1": json.RawMessage(`{"action":"accept","content":{"confirm":true}}`)}
	completed := working
	completed.St, completed.Rev, completed.U = Completed, 3, now+2000
	completed.Res = json.RawMessage(`{"content":[{"type":"text","text":"exported 3 documents"}]}`)
	completed.Exp = m.expiry(&completed)
	failed := working
	failed.St, failed.Msg, failed.Rev, failed.U = Failed, msgLapsed, 2, now+5000
	failed.Err = &jsonrpc.Error{Code: -32603, Message: msgLapsed}
	failed.Exp = m.expiry(&failed)
	cancelled := working
	cancelled.St, cancelled.Rev, cancelled.U = Cancelled, 2, now+3000
	cancelled.Exp = m.expiry(&cancelled)
	return map[string]taskRecord{"working": working, "input-required": input, "completed": completed, "failed": failed, "cancelled": cancelled}
}

// atGoldenNow signs again, as published at goldenNow, a message signed
// by s for channel just now.
func atGoldenNow(t *testing.T, s *sign.Signer, channel string, msg []byte) []byte {
	t.Helper()
	p, err := s.OpenMessage(channel, time.Now(), messageWindow, msg)
	if err != nil {
		t.Fatalf("the message published on %q does not verify: %v", channel, err)
	}
	return s.SignMessage(channel, goldenNow, p)
}

type goldenCase struct {
	name  string
	build func(t *testing.T, m *Manager, st *recording) []byte
	check func(t *testing.T, m *Manager, b []byte)
}

// TestGolden pins the task record, the owner index, the lease and the
// two kinds of message; see the comment at the top of this file.
func TestGolden(t *testing.T) {
	ctx := context.Background()
	var cases []goldenCase
	for _, status := range []string{"working", "input-required", "completed", "failed", "cancelled"} {
		cases = append(cases, goldenCase{
			name: "record-" + status + ".golden",
			build: func(t *testing.T, m *Manager, _ *recording) []byte {
				rec := goldenRecords(m)[status]
				return m.encode(goldenID, &rec)
			},
			check: func(t *testing.T, m *Manager, b []byte) {
				want := goldenRecords(m)[status]
				m.cfg.Store.PutIfAbsent(ctx, taskKey(goldenID), b, time.Hour)
				m.cfg.Store.PutIfAbsent(ctx, leaseKey(goldenID), []byte(want.By), time.Hour)
				got, _, err := m.load(ctx, goldenID, alice.digest())
				if err != nil {
					t.Fatalf("load: %v", err)
				}
				if !reflect.DeepEqual(got, want) {
					t.Errorf("read\n%+v\nwant\n%+v", got, want)
				}
				d, err := m.Get(ctx, alice, goldenID)
				if err != nil || !reflect.DeepEqual(d, want.detailed(goldenID)) {
					t.Errorf("Get: %+v, %v", d, err)
				}
				if _, err := m.Get(ctx, mallory, goldenID); err != ErrNotFound {
					t.Errorf("another tenant's Get: %v", err)
				}
			},
		})
	}
	cases = append(cases,
		goldenCase{
			name: "owner-index.golden",
			build: func(t *testing.T, m *Manager, _ *recording) []byte {
				exp := goldenRecords(m)["working"].Exp
				for _, id := range []string{goldenID, goldenID2} {
					if err := m.admit(ctx, alice.digest(), id, exp); err != nil {
						t.Fatal(err)
					}
				}
				b, err := m.cfg.Store.Load(ctx, ownerKey(alice.digest()))
				if err != nil {
					t.Fatal(err)
				}
				return b
			},
			check: func(t *testing.T, m *Manager, b []byte) {
				m.cfg.Store.PutIfAbsent(ctx, ownerKey(alice.digest()), b, time.Hour)
				live, err := m.owners.Live(ctx, ownerKey(alice.digest()))
				exp := goldenRecords(m)["working"].Exp
				if err != nil || len(live) != 2 || live[0].ID != goldenID || live[1].ID != goldenID2 || live[0].Until != exp {
					t.Errorf("Live: %+v, %v", live, err)
				}
			},
		},
		goldenCase{
			name: "keys.golden",
			build: func(t *testing.T, m *Manager, _ *recording) []byte {
				var b strings.Builder
				for _, kv := range [][2]string{
					{"task", taskKey(goldenID)},
					{"lease", leaseKey(goldenID)},
					{"lease value", "the runner's token, the record's by"},
					{"owner digest", alice.digest()},
					{"owner index", ownerKey(alice.digest())},
					{"tenant digest", digest("tenant", alice.Tenant)},
					{"status channel", alice.channel()},
					{"signal channel", signalChannel},
					{"signal kinds", signalCancel + " " + signalInput},
					{"purposes", "task task-owner task-signal task-status"},
				} {
					fmt.Fprintf(&b, "%s = %s\n", kv[0], kv[1])
				}
				return []byte(b.String())
			},
			check: func(t *testing.T, m *Manager, b []byte) {
				want := "status channel = " + tenantChannel(digest("tenant", "acme")) + "\n"
				if !strings.Contains(string(b), want) || !strings.Contains(string(b), "task = task/"+goldenID+"\n") {
					t.Errorf("keys %q", b)
				}
				if !validID(goldenID) || !isDigest(alice.digest()) {
					t.Error("an id of the golden keys is refused")
				}
			},
		},
	)
	for _, kind := range []string{signalCancel, signalInput} {
		cases = append(cases, goldenCase{
			name: "signal-" + kind + ".golden",
			build: func(t *testing.T, m *Manager, st *recording) []byte {
				m.sendSignal(ctx, goldenID, kind)
				return atGoldenNow(t, m.signal, signalChannel, st.only(t, signalChannel))
			},
			check: func(t *testing.T, m *Manager, b []byte) {
				p, err := m.signal.OpenMessage(signalChannel, goldenNow, messageWindow, b)
				var s signalMsg
				if err != nil || json.Unmarshal(p, &s) != nil || s != (signalMsg{ID: goldenID, Kind: kind}) {
					t.Errorf("signal %+v, %v", s, err)
				}
			},
		})
	}
	for _, status := range []string{"working", "input-required", "completed"} {
		cases = append(cases, goldenCase{
			name: "status-" + status + ".golden",
			build: func(t *testing.T, m *Manager, st *recording) []byte {
				rec := goldenRecords(m)[status]
				m.publishStatus(ctx, goldenID, &rec)
				return atGoldenNow(t, m.status, alice.channel(), st.only(t, alice.channel()))
			},
			check: func(t *testing.T, m *Manager, b []byte) {
				// As a Listener of alice's tenant reads it.
				rec := goldenRecords(m)[status]
				p, err := m.status.OpenMessage(alice.channel(), goldenNow, messageWindow, b)
				var s statusMsg
				if err != nil || json.Unmarshal(p, &s) != nil {
					t.Fatalf("status %q: %v", p, err)
				}
				n := Notification{owner: s.Owner, Task: s.Task}
				if !validID(s.Task.TaskID) || !s.Task.Status.valid() || s.Rev != rec.Rev || !n.For(alice) || n.For(bob) ||
					!reflect.DeepEqual(s.Task, rec.detailed(goldenID)) {
					t.Errorf("status %+v", s)
				}
			},
		})
	}
	names := map[string]bool{}
	for _, c := range cases {
		names[c.name] = true
		t.Run(strings.TrimSuffix(c.name, ".golden"), func(t *testing.T) {
			m, st := goldenManager(t)
			want := golden.File(t, c.name, c.build(t, m, st))
			m, _ = goldenManager(t)
			c.check(t, m, want)
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
