package mcptest

import (
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

func collect(t *testing.T, r io.Reader) ([]Event, error) {
	t.Helper()
	var evs []Event
	for ev, err := range ReadSSE(r) {
		if err != nil {
			return append(evs, ev), err
		}
		evs = append(evs, ev)
	}
	return evs, nil
}

func TestReadSSE(t *testing.T) {
	long := strings.Repeat("x", 200_000)
	cases := []struct {
		name string
		in   string
		want []Event
		err  error
	}{
		{
			name: "multi-line data",
			in:   "data: a\ndata:b\ndata:  c\n\n",
			want: []Event{{Data: "a\nb\n c", HasData: true}},
		},
		{
			name: "CRLF, CR and LF line ends",
			in:   "id: 1\r\ndata: one\r\n\r\nid: 2\rdata: two\r\rid: 3\ndata: three\n\n",
			want: []Event{
				{ID: "1", HasID: true, Data: "one", HasData: true},
				{ID: "2", HasID: true, Data: "two", HasData: true},
				{ID: "3", HasID: true, Data: "three", HasData: true},
			},
		},
		{
			name: "comments and unknown fields",
			in:   ": comment\n:another\nfoo: bar\n\n: only a comment\n\nevent: note\n: inside\ndata: x\n\n",
			want: []Event{{Name: "note", Data: "x", HasData: true}},
		},
		{
			name: "retry",
			in:   "retry: 1500\n\nretry: 12a\ndata: y\n\nretry:\ndata: z\n\n",
			want: []Event{
				{Retry: 1500 * time.Millisecond, HasRetry: true},
				{Data: "y", HasData: true},
				{Data: "z", HasData: true},
			},
		},
		{
			name: "priming event and empty data",
			in:   "id: p0\ndata:\n\ndata\ndata\n\n",
			want: []Event{
				{ID: "p0", HasID: true, HasData: true},
				{Data: "\n", HasData: true},
			},
		},
		{
			name: "field without colon, colon in value, NUL in id",
			in:   "event\ndata: a:b: c\nid: x\x00y\n\n",
			want: []Event{{Data: "a:b: c", HasData: true}},
		},
		{
			name: "BOM and blank lines between events",
			in:   "\xEF\xBB\xBFdata: first\n\n\n\n\ndata: second\n\n",
			want: []Event{{Data: "first", HasData: true}, {Data: "second", HasData: true}},
		},
		{
			name: "long line",
			in:   "data: " + long + "\n\n",
			want: []Event{{Data: long, HasData: true}},
		},
		{
			name: "no trailing blank line",
			in:   "data: done\n\ndata: partial\n",
			want: []Event{{Data: "done", HasData: true}, {Data: "partial", HasData: true}},
			err:  ErrIncompleteEvent,
		},
		{
			name: "no trailing newline at all",
			in:   "data: done\n\ndata: partial",
			want: []Event{{Data: "done", HasData: true}, {Data: "partial", HasData: true}},
			err:  ErrIncompleteEvent,
		},
		{
			name: "trailing comment without blank line is a clean end",
			in:   "data: done\n\n: bye",
			want: []Event{{Data: "done", HasData: true}},
		},
		{
			name: "empty input",
			in:   "",
		},
		{
			name: "JSON-RPC payloads",
			in:   "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{}}\n\ndata: [{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}]\n\ndata: not json\n\n",
			want: []Event{
				{Data: `{"jsonrpc":"2.0","method":"notifications/progress","params":{}}`, HasData: true},
				{Data: `[{"jsonrpc":"2.0","id":1,"result":{}}]`, HasData: true},
				{Data: "not json", HasData: true},
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// Whole input, and one byte at a time (splits CRLF pairs and
			// the BOM across reads).
			for _, r := range []io.Reader{strings.NewReader(tc.in), iotest.OneByteReader(strings.NewReader(tc.in))} {
				got, err := collect(t, r)
				if !errors.Is(err, tc.err) {
					t.Fatalf("err %v, want %v", err, tc.err)
				}
				if len(got) != len(tc.want) {
					t.Fatalf("got %d events %+v, want %d", len(got), got, len(tc.want))
				}
				for i := range got {
					g, w := got[i], tc.want[i]
					if g.ID != w.ID || g.HasID != w.HasID || g.Name != w.Name || g.Data != w.Data ||
						g.HasData != w.HasData || g.Retry != w.Retry || g.HasRetry != w.HasRetry {
						t.Errorf("event %d:\n got %+v\nwant %+v", i, g, tc.want[i])
					}
				}
			}
		})
	}
}

func TestReadSSEMessages(t *testing.T) {
	in := "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progress\":1}}\n\n" +
		"data: [{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}},{\"jsonrpc\":\"2.0\",\"id\":2,\"error\":{\"code\":-32601,\"message\":\"m\"}}]\n\n" +
		"data: {broken\n\n"
	evs, err := collect(t, strings.NewReader(in))
	if err != nil || len(evs) != 3 {
		t.Fatalf("%v %v", evs, err)
	}
	if m := evs[0].Message; m == nil || !m.IsNotification() || string(m.Params) != `{"progress":1}` || len(evs[0].Messages()) != 1 {
		t.Fatalf("message %+v", evs[0])
	}
	if b := evs[1].Batch; len(b) != 2 || !b[0].IsResponse() || b[1].Error == nil || b[1].Error.Code != CodeMethodNotFound || evs[1].Message != nil {
		t.Fatalf("batch %+v", evs[1])
	}
	if evs[2].Message != nil || evs[2].Batch != nil || evs[2].Messages() != nil {
		t.Fatalf("broken %+v", evs[2])
	}
}

func TestSSEReaderState(t *testing.T) {
	r := NewSSEReader(strings.NewReader("id: a\ndata: 1\n\ndata: 2\n\nid\ndata: 3\n\n"))
	want := []string{"a", "a", ""}
	for i, w := range want {
		if _, err := r.Next(); err != nil {
			t.Fatal(err)
		}
		if r.LastEventID() != w {
			t.Errorf("event %d: last id %q want %q", i, r.LastEventID(), w)
		}
	}
	for range 2 {
		if _, err := r.Next(); err != io.EOF {
			t.Fatalf("want EOF, got %v", err)
		}
	}
	// A read error other than EOF is passed through and sticks.
	boom := errors.New("boom")
	r = NewSSEReader(io.MultiReader(strings.NewReader("data: x\n\n"), iotest.ErrReader(boom)))
	if ev, err := r.Next(); err != nil || ev.Data != "x" {
		t.Fatalf("%+v %v", ev, err)
	}
	for range 2 {
		if _, err := r.Next(); !errors.Is(err, boom) {
			t.Fatalf("want boom, got %v", err)
		}
	}
}

// TestReadSSEStopEarly checks that breaking out of the loop is fine.
func TestReadSSEStopEarly(t *testing.T) {
	n := 0
	for range ReadSSE(strings.NewReader("data: 1\n\ndata: 2\n\n")) {
		n++
		break
	}
	if n != 1 {
		t.Fatal(n)
	}
}
