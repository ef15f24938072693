package ownerindex

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/mcphandler/mcphandler/internal/golden"
	"github.com/mcphandler/mcphandler/internal/sign"
	"github.com/mcphandler/mcphandler/session"
)

// The golden files of testdata/golden hold, byte for byte, the index an
// Index stores: the indexes of tasks, approvals, confirms, event logs and
// sign-ins are all this format (each under a purpose of its own, pinned
// by its package), and replicas of two releases read each other's during
// a rolling upgrade. Each case writes an index through Admit, with fixed
// keys, clock and ids, compares it with its file, then reads the file
// back with Live.
//
// go test -run TestGolden -update rewrites the files: only for a change
// that says how mixed releases still interoperate.

var (
	goldenKeys = [][]byte{[]byte("mcphandler golden key, 32 bytes!")}
	goldenNow  = time.UnixMilli(1_785_231_000_000) // 2026-07-28T09:30:00Z
)

const goldenKey = "golden-owner/alice"

func goldenIndex(t *testing.T, st session.Records) *Index {
	s, err := sign.NewSigner("golden-owner", goldenKeys...)
	if err != nil {
		t.Fatal(err)
	}
	return New(Config{Store: st, Signer: s, Max: 2, ValidID: validID, MaxIDLen: 4, Now: func() time.Time { return goldenNow }})
}

// TestGolden pins an index as Admit writes it, with and without the time
// of its last check; see the comment at the top of this file.
func TestGolden(t *testing.T) {
	ctx := context.Background()
	until := func(d time.Duration) int64 { return goldenNow.Add(d).UnixMilli() }
	for _, c := range []struct {
		name  string
		admit func(t *testing.T, x *Index)
		live  []Entry
	}{
		{"index.golden", func(t *testing.T, x *Index) {
			for i, id := range []string{"id01", "id02"} {
				if err := x.Admit(ctx, goldenKey, id, until(time.Duration(i+1)*time.Minute), nil); err != nil {
					t.Fatal(err)
				}
			}
		}, []Entry{{"id01", until(time.Minute)}, {"id02", until(2 * time.Minute)}}},
		{"index-checked.golden", func(t *testing.T, x *Index) {
			// At the bound, the check drops id01: the index keeps when it
			// looked.
			for i, id := range []string{"id01", "id02", "id03"} {
				drop := func(_ context.Context, live []Entry) ([]Entry, error) { return live[1:], nil }
				if err := x.Admit(ctx, goldenKey, id, until(time.Duration(i+1)*time.Minute), drop); err != nil {
					t.Fatal(err)
				}
			}
		}, []Entry{{"id02", until(2 * time.Minute)}, {"id03", until(3 * time.Minute)}}},
	} {
		t.Run(strings.TrimSuffix(c.name, ".golden"), func(t *testing.T) {
			st := session.NewMemory()
			c.admit(t, goldenIndex(t, st))
			b, err := st.Load(ctx, goldenKey)
			if err != nil {
				t.Fatal(err)
			}
			want := golden.File(t, c.name, b)
			st = session.NewMemory()
			st.PutIfAbsent(ctx, goldenKey, want, time.Hour)
			x := goldenIndex(t, st)
			live, err := x.Live(ctx, goldenKey)
			if err != nil || len(live) != len(c.live) {
				t.Fatalf("Live: %+v, %v", live, err)
			}
			for i := range live {
				if live[i] != c.live[i] {
					t.Errorf("entry %d: %+v, want %+v", i, live[i], c.live[i])
				}
			}
			if idx, _, _ := x.load(ctx, goldenKey); c.name == "index-checked.golden" && idx.C != goldenNow.UnixMilli() {
				t.Errorf("checked at %d, want %d", idx.C, goldenNow.UnixMilli())
			}
		})
	}
}
