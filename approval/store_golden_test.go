package approval

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcphandler/mcphandler/internal/golden"
	"github.com/mcphandler/mcphandler/session"
)

// The golden files of testdata/golden hold, byte for byte, what a Store
// keeps and publishes: the record of an approval, the index from a call
// to its approval, the index of a caller's pending approvals, the wake-up
// of its waiters and the transition every replica remembers (its
// seen-set). Replicas of two releases read each other's during a rolling
// upgrade. Each case builds its value through the Store, with fixed keys,
// clock and ids, compares it with its file, then reads the file back as
// a Store does.
//
// go test -run TestGolden -update rewrites the files: only for a change
// that says how mixed releases still interoperate.

var (
	goldenKeys  = [][]byte{[]byte("mcphandler golden key, 32 bytes!")}
	goldenNow   = time.UnixMilli(1_785_231_000_000) // 2026-07-28T09:30:00Z
	goldenAsker = Identity{Subject: "alice", Tenant: "acme", Role: "editor"}
	goldenAdmin = Identity{Subject: "ada", Tenant: "acme", Role: "admin"}
)

const (
	goldenID   = "GoldenApprovalId012345"
	goldenID2  = "GoldenApprovalId6789-_"
	goldenArgs = `{ "path": "/srv/docs/readme.md", "force": true }`
)

// goldenShared is a memory store that keeps what is published.
type goldenShared struct {
	*session.Memory
	mu   sync.Mutex
	msgs map[string][][]byte
}

func (s *goldenShared) Publish(ctx context.Context, channel string, msg []byte) (int, error) {
	s.mu.Lock()
	if s.msgs == nil {
		s.msgs = map[string][][]byte{}
	}
	s.msgs[channel] = append(s.msgs[channel], bytes.Clone(msg))
	s.mu.Unlock()
	return s.Memory.Publish(ctx, channel, msg)
}

func (s *goldenShared) only(t *testing.T, channel string) []byte {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.msgs[channel]) != 1 {
		t.Fatalf("%d messages on %q, want 1", len(s.msgs[channel]), channel)
	}
	return s.msgs[channel][0]
}

func goldenStore(t *testing.T) (*Store, *goldenShared) {
	sh := &goldenShared{Memory: session.NewMemory()}
	s := newTestStore(t, sh, func(c *Config) { c.Keys = goldenKeys })
	s.now = func() time.Time { return goldenNow }
	return s, sh
}

// goldenRequest is the call the golden approval is for.
var goldenRequest = Request{Asker: goldenAsker, Tool: "delete_file", Arguments: []byte(goldenArgs),
	Message: "Delete the readme?", Policy: Policy{MinRole: "admin", Rule: "same-team"}}

// goldenRecords are the golden approval in each state.
func goldenRecords(t *testing.T, s *Store) map[State]*stored {
	args, digest, err := s.check(&goldenRequest)
	if err != nil {
		t.Fatal(err)
	}
	now := goldenNow.UnixMilli()
	pending := &stored{State: Pending, Asker: goldenAsker, Tool: goldenRequest.Tool, Digest: hex.EncodeToString(digest[:]),
		Args: args, Message: goldenRequest.Message, Policy: goldenRequest.Policy, Created: now, Expires: now + s.cfg.TTL.Milliseconds()}
	decided := func(st State, by Identity) *stored {
		r := pending.with(st)
		r.By, r.Decided = &by, now+30_000
		return r
	}
	return map[State]*stored{
		Pending: pending, Approved: decided(Approved, goldenAdmin), Declined: decided(Declined, goldenAdmin),
		Used: decided(Used, goldenAdmin), Expired: pending.with(Expired), Withdrawn: pending.with(Withdrawn),
	}
}

// goldenHints are the hints of a tool that says it is not destructive,
// idempotent and reaches nothing outside.
var goldenHints = &Annotations{Destructive: new(false), Idempotent: true, OpenWorld: new(false)}

// goldenAnnotated is the golden pending approval of a tool with hints.
func goldenAnnotated(t *testing.T, s *Store) *stored {
	r := *goldenRecords(t, s)[Pending]
	r.Ann = goldenHints
	return &r
}

type goldenCase struct {
	name  string
	build func(t *testing.T, s *Store, sh *goldenShared) []byte
	check func(t *testing.T, s *Store, b []byte)
}

// TestGolden pins what approvals store and publish; see the comment of
// update.
func TestGolden(t *testing.T) {
	ctx := context.Background()
	var cases []goldenCase
	for _, st := range []State{Pending, Approved, Declined, Used, Expired, Withdrawn} {
		cases = append(cases, goldenCase{
			name: "record-" + string(st) + ".golden",
			build: func(t *testing.T, s *Store, _ *goldenShared) []byte {
				return s.records.Encode(recordKey(goldenID), goldenRecords(t, s)[st])
			},
			check: func(t *testing.T, s *Store, b []byte) {
				s.cfg.Store.PutIfAbsent(ctx, recordKey(goldenID), b, time.Hour)
				a, err := s.Get(ctx, goldenID)
				if err != nil {
					t.Fatalf("Get: %v", err)
				}
				if want := s.approval(goldenID, goldenRecords(t, s)[st]); !reflect.DeepEqual(a, want) {
					t.Errorf("read\n%+v\nwant\n%+v", a, want)
				}
			},
		})
	}
	// A record of a tool that gives hints: the member "ann", absent from
	// the records above (a tool without hints keeps their bytes).
	cases = append(cases, goldenCase{
		name: "record-pending-annotations.golden",
		build: func(t *testing.T, s *Store, _ *goldenShared) []byte {
			return s.records.Encode(recordKey(goldenID), goldenAnnotated(t, s))
		},
		check: func(t *testing.T, s *Store, b []byte) {
			s.cfg.Store.PutIfAbsent(ctx, recordKey(goldenID), b, time.Hour)
			a, err := s.Get(ctx, goldenID)
			if err != nil {
				t.Fatalf("Get: %v", err)
			}
			if want := s.approval(goldenID, goldenAnnotated(t, s)); !reflect.DeepEqual(a, want) || !sameAnnotations(a.Annotations, goldenHints) {
				t.Errorf("read\n%+v\nwant\n%+v", a, want)
			}
		},
	})
	binding := func(t *testing.T, s *Store) string {
		_, digest, err := s.check(&goldenRequest)
		if err != nil {
			t.Fatal(err)
		}
		return bindingKey(goldenRequest.Asker, goldenRequest.Tool, digest)
	}
	cases = append(cases,
		goldenCase{
			// approval-for/<digest>: the id of the call's latest approval,
			// signed.
			name: "binding-index.golden",
			build: func(t *testing.T, s *Store, _ *goldenShared) []byte {
				if ok, err := s.create(ctx, binding(t, s), nil, goldenID, goldenRecords(t, s)[Pending]); !ok || err != nil {
					t.Fatal(ok, err)
				}
				b, err := s.cfg.Store.Load(ctx, binding(t, s))
				if err != nil {
					t.Fatal(err)
				}
				return b
			},
			check: func(t *testing.T, s *Store, b []byte) {
				s.cfg.Store.PutIfAbsent(ctx, recordKey(goldenID), s.records.Encode(recordKey(goldenID), goldenRecords(t, s)[Pending]), time.Hour)
				s.cfg.Store.PutIfAbsent(ctx, binding(t, s), b, time.Hour)
				a, raw, err := s.current(ctx, binding(t, s))
				if err != nil || a == nil || a.ID != goldenID || !bytes.Equal(raw, b) {
					t.Errorf("current: %+v, %v", a, err)
				}
				// The same call, begun on this replica, finds it.
				if a, created, err := s.Begin(ctx, goldenRequest); err != nil || created || a.ID != goldenID {
					t.Errorf("Begin: %+v, created %v, %v", a, created, err)
				}
			},
		},
		goldenCase{
			name: "owner-index.golden",
			build: func(t *testing.T, s *Store, _ *goldenShared) []byte {
				exp := goldenRecords(t, s)[Pending].Expires
				for _, id := range []string{goldenID, goldenID2} {
					if err := s.admit(ctx, goldenAsker, id, exp); err != nil {
						t.Fatal(err)
					}
				}
				b, err := s.cfg.Store.Load(ctx, ownerKey(goldenAsker))
				if err != nil {
					t.Fatal(err)
				}
				return b
			},
			check: func(t *testing.T, s *Store, b []byte) {
				s.cfg.Store.PutIfAbsent(ctx, ownerKey(goldenAsker), b, time.Hour)
				live, err := s.owners.Live(ctx, ownerKey(goldenAsker))
				exp := goldenRecords(t, s)[Pending].Expires
				if err != nil || len(live) != 2 || live[0].ID != goldenID || live[1].ID != goldenID2 || live[0].Until != exp {
					t.Errorf("Live: %+v, %v", live, err)
				}
			},
		},
	)
	cases = append(cases,
		goldenCase{
			// approval-tenant/<digest>: the pending approvals of a
			// tenant's callers, which the inbox reads.
			name: "tenant-index.golden",
			build: func(t *testing.T, s *Store, _ *goldenShared) []byte {
				exp := goldenRecords(t, s)[Pending].Expires
				for _, id := range []string{goldenID, goldenID2} {
					if err := s.admit(ctx, goldenAsker, id, exp); err != nil {
						t.Fatal(err)
					}
				}
				b, err := s.cfg.Store.Load(ctx, tenantKey(goldenAsker.Tenant))
				if err != nil {
					t.Fatal(err)
				}
				return b
			},
			check: func(t *testing.T, s *Store, b []byte) {
				s.cfg.Store.PutIfAbsent(ctx, tenantKey(goldenAsker.Tenant), b, time.Hour)
				live, err := s.tenants.Live(ctx, tenantKey(goldenAsker.Tenant))
				exp := goldenRecords(t, s)[Pending].Expires
				if err != nil || len(live) != 2 || live[0].ID != goldenID || live[1].ID != goldenID2 || live[0].Until != exp {
					t.Errorf("Live: %+v, %v", live, err)
				}
				// The inbox of the golden approver shows the approval it names.
				s.cfg.Store.PutIfAbsent(ctx, recordKey(goldenID), s.records.Encode(recordKey(goldenID), goldenRecords(t, s)[Pending]), time.Hour)
				s.cfg.Rules = map[string]RuleFunc{"same-team": func(context.Context, *Approval, Identity) error { return nil }}
				list, _, err := s.Inbox(ctx, goldenAdmin, 0)
				if err != nil || len(list) != 1 || list[0].ID != goldenID {
					t.Errorf("Inbox: %+v, %v", list, err)
				}
			},
		},
		goldenCase{
			// The key and purpose of the tenant index (keys.golden holds
			// those of the kinds before it).
			name: "tenant-keys.golden",
			build: func(t *testing.T, s *Store, _ *goldenShared) []byte {
				return fmt.Appendf(nil, "tenant index = %s\npurpose = approval-tenant\n", tenantKey(goldenAsker.Tenant))
			},
			check: func(t *testing.T, s *Store, b []byte) {
				if !strings.Contains(string(b), "tenant index = approval-tenant/") {
					t.Errorf("keys %q", b)
				}
			},
		},
	)
	// decide approves the golden approval as the page's replica does: the
	// transition wakes the waiters (approval/<id>) and tells every replica
	// (approval-state).
	decide := func(t *testing.T, s *Store) {
		recs := goldenRecords(t, s)
		if ok, err := s.create(ctx, binding(t, s), nil, goldenID, recs[Pending]); !ok || err != nil {
			t.Fatal(ok, err)
		}
		raw, err := s.cfg.Store.Load(ctx, recordKey(goldenID))
		if err != nil {
			t.Fatal(err)
		}
		if ok, err := s.move(ctx, goldenID, raw, Pending, recs[Approved]); !ok || err != nil {
			t.Fatal(ok, err)
		}
	}
	cases = append(cases,
		goldenCase{
			name: "wake.golden",
			build: func(t *testing.T, s *Store, sh *goldenShared) []byte {
				decide(t, s)
				return sh.only(t, channel(goldenID))
			},
			check: func(t *testing.T, s *Store, b []byte) {
				p, err := s.mac.OpenMessage(channel(goldenID), goldenNow, messageWindow, b)
				if err != nil || State(p) != Approved {
					t.Errorf("wake-up %q, %v", p, err)
				}
			},
		},
		goldenCase{
			name: "state.golden",
			build: func(t *testing.T, s *Store, sh *goldenShared) []byte {
				decide(t, s)
				return sh.only(t, stateChannel)
			},
			check: func(t *testing.T, s *Store, b []byte) {
				// As hear takes it: the replica remembers the approval
				// approved, and refuses a copy of its pending record.
				p, err := s.mac.OpenMessage(stateChannel, goldenNow, messageWindow, b)
				var m stateMsg
				if err != nil || json.Unmarshal(p, &m) != nil || !ValidID(m.ID) || !m.State.valid() {
					t.Fatalf("state %q: %v", p, err)
				}
				end := goldenRecords(t, s)[Pending].Expires + s.cfg.Linger.Milliseconds()
				if m != (stateMsg{ID: goldenID, State: Approved, End: end}) {
					t.Errorf("state %+v", m)
				}
				s.seen.note(m.ID, m.State, m.End, goldenNow.UnixMilli())
				s.cfg.Store.PutIfAbsent(ctx, recordKey(goldenID), s.records.Encode(recordKey(goldenID), goldenRecords(t, s)[Pending]), time.Hour)
				if _, err := s.Get(ctx, goldenID); err != ErrNotFound {
					t.Errorf("a pending copy after the approval reads as %v", err)
				}
			},
		},
		goldenCase{
			name: "keys.golden",
			build: func(t *testing.T, s *Store, _ *goldenShared) []byte {
				var b strings.Builder
				for _, kv := range [][2]string{
					{"record", recordKey(goldenID)},
					{"wake-up channel", channel(goldenID)},
					{"binding index", binding(t, s)},
					{"pending index", ownerKey(goldenAsker)},
					{"state channel", stateChannel},
					{"purposes", "approval approval-owner"},
				} {
					fmt.Fprintf(&b, "%s = %s\n", kv[0], kv[1])
				}
				return []byte(b.String())
			},
			check: func(t *testing.T, s *Store, b []byte) {
				if !strings.Contains(string(b), "record = approval/"+goldenID+"\n") || !ValidID(goldenID) || !ValidID(goldenID2) {
					t.Errorf("keys %q", b)
				}
			},
		},
	)
	names := map[string]bool{}
	for _, c := range cases {
		names[c.name] = true
		t.Run(strings.TrimSuffix(c.name, ".golden"), func(t *testing.T) {
			s, sh := goldenStore(t)
			want := golden.File(t, c.name, c.build(t, s, sh))
			s, _ = goldenStore(t)
			c.check(t, s, want)
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
