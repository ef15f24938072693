package approval

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcphandler/mcphandler/session"
)

// notices records what OnPending was told, from any replica.
type notices struct {
	mu  sync.Mutex
	ids []string
	got chan *Approval
}

func (n *notices) hook(_ context.Context, a *Approval) {
	n.mu.Lock()
	n.ids = append(n.ids, a.ID)
	n.mu.Unlock()
	n.got <- a
}

func (n *notices) count() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.ids)
}

// OnPending is told once of each new approval, cluster-wide: two
// replicas beginning the same call at once make one approval and one
// notice; the call repeated (on either replica) finds it and tells
// nobody; another call is another notice. The notice carries what the
// host posts: the URL, tool, asker, expiry and policy.
func TestOnPendingOncePerApproval(t *testing.T) {
	eachBackend(t, func(t *testing.T, b *backend) {
		n := &notices{got: make(chan *Approval, 16)}
		mod := func(c *Config) { c.OnPending = n.hook }
		r1, r2 := newTestStore(t, b.replica(), mod), newTestStore(t, b.replica(), mod)
		ctx := context.Background()
		var wg sync.WaitGroup
		ids := make([]string, 8)
		for i := range ids {
			s := r1
			if i%2 == 1 {
				s = r2
			}
			wg.Go(func() {
				a, _, err := s.Begin(ctx, deleteReq(`{"id":"n1"}`))
				if err != nil {
					t.Error(err)
					return
				}
				ids[i] = a.ID
			})
		}
		wg.Wait()
		a := <-n.got
		for _, id := range ids {
			if id != a.ID {
				t.Fatalf("concurrent Begins returned %v, the notice named %s", ids, a.ID)
			}
		}
		if a.URL != "https://app.example/approvals/"+a.ID || a.Tool != "delete_note" || a.Asker != editor ||
			a.Policy.MinRole != "admin" || a.State != Pending || !a.Expires.After(time.Now()) {
			t.Fatalf("notice %+v", a)
		}
		if _, created, _ := r2.Begin(ctx, deleteReq(`{"id":"n1"}`)); created {
			t.Fatal("the repeated call made a new approval")
		}
		begin(t, r2, deleteReq(`{"id":"n2"}`))
		<-n.got
		// Both replicas' workers are idle once their queues are empty;
		// close them, so that no notice can still be on its way.
		r1.Close()
		r2.Close()
		if c := n.count(); c != 2 {
			t.Fatalf("%d notices for two approvals", c)
		}
	})
}

// A hook that hangs or panics never holds a call up: Begin returns while
// it hangs; past the queue, notices are dropped rather than waited for;
// Close cancels the hooks running.
func TestOnPendingNeverHoldsTheCall(t *testing.T) {
	var running, cancelled, panicked atomic.Int64
	release := make(chan struct{})
	hook := func(ctx context.Context, a *Approval) {
		running.Add(1)
		if bytes.Contains(a.Arguments, []byte(`"n0"`)) { // the first call's: panics
			panicked.Add(1)
			panic("the host's hook failed")
		}
		select {
		case <-ctx.Done():
			cancelled.Add(1)
		case <-release:
		}
	}
	s := newTestStore(t, session.NewMemory(), func(c *Config) {
		c.OnPending, c.MaxPendingPerIdentity = hook, 1024
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	})
	for i := range notifyQueue + notifyWorkers + 40 {
		begin(t, s, distinct(i)) // returns although every hook hangs
	}
	deadline := time.Now().Add(10 * time.Second)
	for running.Load() < notifyWorkers+1 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if panicked.Load() != 1 || running.Load() != notifyWorkers+1 {
		t.Fatalf("%d hooks running (one panicked: %d), want the %d workers busy after the panic", running.Load(), panicked.Load(), notifyWorkers)
	}
	s.Close()
	if c := cancelled.Load(); c != notifyWorkers {
		t.Fatalf("Close cancelled %d hooks, want %d", c, notifyWorkers)
	}
	close(release)
	if n := running.Load(); n != notifyWorkers+1 {
		t.Fatalf("hooks ran after Close: %d", n)
	}
}
