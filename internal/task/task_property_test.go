package task

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
)

// Random interleavings of everything a runner and two clients on other
// replicas may do to one task: an observer never sees an illegal
// transition nor a terminal task change, every answer reaches the runner
// at most once and only for a key it asked, and exactly one terminal
// transition is reported as won.
func TestPropertyInterleavings(t *testing.T) {
	eachStore(t, func(t *testing.T, rs *replicas) {
		a, b, c := rs.add(), rs.add(), rs.add()
		n := 40
		if rs.redis {
			n = 15
		}
		for seed := range n {
			interleave(t, uint64(seed), a, []*Manager{b, c})
		}
	})
}

func interleave(t *testing.T, seed uint64, runner *Manager, clients []*Manager) {
	ctx := ctxT(t)
	run, d := mustCreate(t, runner, alice)
	var wins, mu = 0, sync.Mutex{}
	won := func(err error) {
		if err == nil {
			mu.Lock()
			wins++
			mu.Unlock()
		} else if !errors.Is(err, ErrTerminal) && !errors.Is(err, ErrInvalidInput) {
			t.Errorf("seed %d: %v", seed, err)
		}
	}
	var wg sync.WaitGroup
	wg.Go(func() { runnerSteps(t, seed, ctx, run, won) })
	for i, m := range clients {
		wg.Go(func() { clientSteps(seed+uint64(i)*1000, ctx, m, d.TaskID, won) })
	}
	wg.Go(func() { observe(t, seed, ctx, clients[0], d.TaskID) })
	wg.Wait()
	if wins != 1 {
		t.Fatalf("seed %d: %d terminal transitions won", seed, wins)
	}
	if s := mustGet(t, clients[1], alice, d.TaskID).Status; !s.Terminal() {
		t.Fatalf("seed %d: task left %s", seed, s)
	}
}

func runnerSteps(t *testing.T, seed uint64, ctx context.Context, run *Run, won func(error)) {
	rnd := rand.New(rand.NewPCG(seed, 1))
	asked := map[string]bool{}
	got := map[string]bool{}
	for step := range 12 {
		switch rnd.IntN(6) {
		case 0, 1:
			k := fmt.Sprintf("k%d", step)
			if run.RequestInput(ctx, map[string]json.RawMessage{k: json.RawMessage(`{"method":"elicitation/create"}`)}, k) == nil {
				asked[k] = true
			}
		case 2:
			for k := range asked {
				if m, err := run.takeAnswers(ctx, []string{k}); err == nil && m != nil {
					if got[k] || !asked[k] {
						t.Errorf("seed %d: answer %q delivered again or never asked", seed, k)
					}
					got[k] = true
				}
			}
		case 3:
			run.SetMessage(ctx, "step")
		}
	}
	if rnd.IntN(2) == 0 {
		won(run.Complete(ctx, result("done")))
	} else {
		won(run.Fail(ctx, nil))
	}
}

func clientSteps(seed uint64, ctx context.Context, m *Manager, id string, won func(error)) {
	rnd := rand.New(rand.NewPCG(seed, 2))
	for range 8 {
		switch rnd.IntN(5) {
		case 0:
			if _, err := m.Cancel(ctx, alice, id); rnd.IntN(3) == 0 || err == nil {
				won(err)
				return
			}
		case 1, 2:
			k := fmt.Sprintf("k%d", rnd.IntN(12))
			m.Update(ctx, alice, id, map[string]json.RawMessage{k: json.RawMessage(`{"action":"accept"}`)})
		default:
			m.Get(ctx, alice, id)
		}
	}
}

// observe reads the task until it ended, checking each change is legal.
func observe(t *testing.T, seed uint64, ctx context.Context, m *Manager, id string) {
	var last DetailedTask
	for i := 0; i < 400; i++ {
		d, err := m.Get(ctx, alice, id)
		if err != nil {
			t.Errorf("seed %d: %v", seed, err)
			return
		}
		if last.Status != "" && d.Status != last.Status && !canMove(last.Status, d.Status) {
			t.Errorf("seed %d: observed %s → %s", seed, last.Status, d.Status)
		}
		if last.Status.Terminal() && (d.Status != last.Status || d.LastUpdatedAt != last.LastUpdatedAt || string(d.Result) != string(last.Result)) {
			t.Errorf("seed %d: ended task changed: %+v → %+v", seed, last, d)
		}
		if d.Status == InputRequired && len(d.InputRequests) == 0 {
			t.Errorf("seed %d: input_required without requests", seed)
		}
		if last.Status.Terminal() {
			return
		}
		last = d
	}
}
