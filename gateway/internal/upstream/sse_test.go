package upstream

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

// readAll reads every event of in with the given bounds and a budget of
// total bytes, and returns them with the error that ended the stream.
func readAll(in string, maxLine, maxEvent int, total int64) ([]event, error) {
	left := total
	r := newSSEReader(&limitReader{r: strings.NewReader(in), left: &left, what: "an SSE stream", max: total}, maxLine, maxEvent)
	var evs []event
	for {
		ev, err := r.next()
		if err != nil {
			return evs, err
		}
		evs = append(evs, ev)
	}
}

func TestSSEReader(t *testing.T) {
	cases := []struct {
		name, in string
		want     []string // name|data|id of each event
		err      error
	}{
		{"lf", "data: a\n\ndata: b\n\n", []string{"|a|", "|b|"}, io.EOF},
		{"crlf", "data: a\r\n\r\ndata: b\r\n\r\n", []string{"|a|", "|b|"}, io.EOF},
		{"cr", "data: a\r\rdata: b\r\r", []string{"|a|", "|b|"}, io.EOF},
		{"bom", "\xEF\xBB\xBFdata: a\n\n", []string{"|a|"}, io.EOF},
		{"bom only once", "\xEF\xBB\xBFdata: a\n\n\xEF\xBB\xBFdata: b\n\n", []string{"|a|"}, io.EOF},
		{"multi-line data", "data: a\ndata:b\ndata:  c\n\n", []string{"|a\nb\n c|"}, io.EOF},
		{"comments and fields", ": hi\nevent: endpoint\nid: 7\nretry: 5\nfoo: bar\ndata: /m\n\n", []string{"endpoint|/m|7"}, io.EOF},
		{"empty data is not an event", "id: 1\ndata:\n\nid: 2\ndata\n\ndata: x\n\n", []string{"|x|2"}, io.EOF},
		{"two empty data lines", "data\ndata\n\n", []string{"|\n|"}, io.EOF}, // as a browser: data "\n"
		{"id kept across events", "id: a\ndata: 1\n\ndata: 2\n\nid\ndata: 3\n\n", []string{"|1|a", "|2|a", "|3|"}, io.EOF},
		{"id with NUL ignored", "id: a\x00b\ndata: 1\n\n", []string{"|1|"}, io.EOF},
		{"name reset per event", "event: x\ndata: 1\n\ndata: 2\n\n", []string{"x|1|", "|2|"}, io.EOF},
		{"incomplete", "data: a\n\ndata: b\n", []string{"|a|"}, errIncomplete},
		{"unterminated line", "data: a\n\ndata: b", []string{"|a|"}, errIncomplete},
		{"comment at the end", "data: a\n\n: bye\n", []string{"|a|"}, io.EOF},
		{"line too long", "data: " + strings.Repeat("x", 100) + "\n\n", nil, ErrTooLarge},
		{"event too large", strings.Repeat("data: xxxxxxxxxx\n", 20) + "\n", nil, ErrTooLarge},
		{"stream too large", strings.Repeat(":\n", 600), nil, ErrTooLarge},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			evs, err := readAll(c.in, 64, 128, 1024)
			var got []string
			for _, ev := range evs {
				got = append(got, ev.name+"|"+string(ev.data)+"|"+ev.id)
			}
			if strings.Join(got, ",") != strings.Join(c.want, ",") {
				t.Errorf("events %q, want %q", got, c.want)
			}
			if !errors.Is(err, c.err) {
				t.Errorf("err %v, want %v", err, c.err)
			}
		})
	}
}

// The reader gives the same events whatever the reads' sizes: lines and
// line ends split across reads, the BOM split too.
func TestSSEReaderSplitReads(t *testing.T) {
	in := "\xEF\xBB\xBFdata: a\r\ndata: b\r\rid: 9\rretry: 20\rdata: c\r\n\r\n"
	r := newSSEReader(iotest.OneByteReader(strings.NewReader(in)), 64, 128)
	var got []string
	for {
		ev, err := r.next()
		if err != nil {
			if err != io.EOF {
				t.Fatal(err)
			}
			break
		}
		got = append(got, string(ev.data)+"|"+ev.id)
		if ev.retry != 0 && ev.retry != 20*time.Millisecond {
			t.Errorf("retry %v", ev.retry)
		}
	}
	if strings.Join(got, ",") != "a\nb|,c|9" {
		t.Errorf("events %q", got)
	}
}

// limitReader lets exactly its budget through, shared by its readers.
func TestLimitReader(t *testing.T) {
	left := int64(10)
	a := &limitReader{r: strings.NewReader("0123456"), left: &left, max: 10, what: "x"}
	if b, err := io.ReadAll(a); err != nil || string(b) != "0123456" {
		t.Fatalf("%q %v", b, err)
	}
	b := &limitReader{r: strings.NewReader("789"), left: &left, max: 10, what: "x"}
	if got, err := io.ReadAll(b); err != nil || string(got) != "789" {
		t.Fatalf("%q %v: a body ending at the limit is whole", got, err)
	}
	c := &limitReader{r: strings.NewReader("more"), left: &left, max: 10, what: "x"}
	if _, err := io.ReadAll(c); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("err %v", err)
	}
}

func TestHeaderValue(t *testing.T) {
	for in, want := range map[string]string{
		"search_issues":  "search_issues",
		"with space":     "with space",
		" lead":          "=?base64?IGxlYWQ=?=",
		"trail\t":        "=?base64?dHJhaWwJ?=",
		"Zürich":         "=?base64?WsO8cmljaA==?=",
		"=?base64?abc?=": "=?base64?PT9iYXNlNjQ/YWJjPz0=?=",
		"=?BASE64?abc?=": "=?BASE64?abc?=",
		"ctl\x01":        "=?base64?Y3RsAQ==?=",
		"":               "=?base64??=",
	} {
		if got := headerValue(in); got != want {
			t.Errorf("headerValue(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestFinalResult(t *testing.T) {
	in := `{"resultType":"complete","content":[{"type":"text","text":"x"}],"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"evil"},"trace":"t"},"isError":false}`
	want := `{"content":[{"type":"text","text":"x"}],"_meta":{"trace":"t"},"isError":false}`
	if got := finalResult([]byte(in)); string(got) != want {
		t.Errorf("got %s", got)
	}
	in = `{"content":[],"_meta":{"io.modelcontextprotocol/x":1}}`
	if got := finalResult([]byte(in)); string(got) != `{"content":[]}` {
		t.Errorf("got %s", got)
	}
}

func TestParseCaps(t *testing.T) {
	c, err := parseCaps([]byte(`{"elicitation":{"form":{}},"tasks":{"requests":{}},"extensions":{"io.modelcontextprotocol/tasks":{},"x":{}},"roots":{"listChanged":true}}`))
	if err != nil {
		t.Fatal(err)
	}
	if string(c.raw) != `{"elicitation":{"form":{}},"extensions":{"x":{}},"roots":{"listChanged":true}}` {
		t.Errorf("raw %s", c.raw)
	}
	if !c.allows("elicitation/create") || c.allows("sampling/createMessage") || !c.allows("roots/list") || c.allows("ping") {
		t.Errorf("allows %+v", c)
	}
	for _, bad := range []string{`[]`, `"x"`, `{"a":1,"a":2}`, `{`, strings.Repeat("[", 200)} {
		if _, err := parseCaps([]byte(bad)); err == nil {
			t.Errorf("parseCaps(%.20q) accepted", bad)
		}
	}
	if c, _ := parseCaps(nil); !bytes.Equal(c.raw, []byte("{}")) {
		t.Errorf("nil caps: %s", c.raw)
	}
}
