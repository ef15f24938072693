package approval

import (
	"context"
	"testing"
)

// TestAnnotations: the tool's hints travel with the approval, as given;
// they bind like the message (a call asked again with other hints is
// another approval); hints that say nothing are none; the MCP defaults
// apply to what is unset.
func TestAnnotations(t *testing.T) {
	eachBackend(t, func(t *testing.T, b *backend) {
		ctx := context.Background()
		s1, s2 := b.store(nil), b.store(nil)
		req := deleteReq(`{"id":"n1"}`)
		req.Annotations = &Annotations{Destructive: new(true), OpenWorld: new(false), Idempotent: true}
		a := begin(t, s1, req)
		got, err := s2.Get(ctx, a.ID)
		if err != nil || !sameAnnotations(got.Annotations, req.Annotations) || got.Annotations == req.Annotations {
			t.Fatalf("read on another replica: %+v, %v", got.Annotations, err)
		}
		*req.Annotations.Destructive = false // the caller's value is not kept by reference
		if got, _ := s2.Get(ctx, a.ID); !*got.Annotations.Destructive {
			t.Fatal("the record changed with the caller's value")
		}
		*req.Annotations.Destructive = true
		if again, created, err := s2.Begin(ctx, req); err != nil || created || again.ID != a.ID {
			t.Fatalf("the same call with the same hints: %v created=%v", err, created)
		}
		other := req
		other.Annotations = &Annotations{ReadOnly: true}
		if o, created, err := s2.Begin(ctx, other); err != nil || !created || o.ID == a.ID {
			t.Fatalf("the same call with other hints: %v created=%v", err, created)
		}
		none := deleteReq(`{"id":"n2"}`)
		none.Annotations = &Annotations{}
		n := begin(t, s1, none)
		if got, _ := s2.Get(ctx, n.ID); got.Annotations != nil {
			t.Fatalf("hints that say nothing were kept: %+v", got.Annotations)
		}
		none.Annotations = nil
		if again, created, err := s2.Begin(ctx, none); err != nil || created || again.ID != n.ID {
			t.Fatalf("no hints and unset hints differ: %v created=%v", err, created)
		}
	})
	for _, c := range []struct {
		a                  *Annotations
		destructive, world bool
	}{
		{nil, true, true},
		{&Annotations{}, true, true},
		{&Annotations{ReadOnly: true}, false, true},
		{&Annotations{ReadOnly: true, Destructive: new(true)}, false, true},
		{&Annotations{Destructive: new(false), OpenWorld: new(false)}, false, false},
		{&Annotations{OpenWorld: new(true)}, true, true},
	} {
		if c.a.IsDestructive() != c.destructive || c.a.IsOpenWorld() != c.world {
			t.Errorf("%+v: destructive %v, open world %v", c.a, c.a.IsDestructive(), c.a.IsOpenWorld())
		}
	}
}
