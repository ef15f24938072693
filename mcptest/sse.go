package mcptest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"strconv"
	"time"
)

// ErrIncompleteEvent is returned by [SSEReader.Next] (and yielded by
// [ReadSSE]) when the input ends in the middle of an event, that is after
// at least one field line but before the blank line that ends the event. The
// partial event is returned together with the error. A browser EventSource
// would silently discard it; a test usually wants to know. It wraps
// [io.ErrUnexpectedEOF].
var ErrIncompleteEvent = fmt.Errorf("mcptest: SSE input ended inside an event (no blank line after it): %w", io.ErrUnexpectedEOF)

// Event is one Server-Sent Event.
//
// Unlike a browser EventSource, the reader reports every block that has at
// least one id, event, data or retry field, even when it has no data, so
// that priming events (an id with empty data) and retry-only events are
// visible to tests. Comment lines and unknown fields are skipped.
type Event struct {
	// ID is the value of the event's id field, or "" if it had none (see
	// HasID). An id field containing U+0000 is ignored, as the SSE spec says.
	ID string
	// HasID reports whether the event had an id field.
	HasID bool
	// Name is the value of the event field; "" means the default type
	// ("message").
	Name string
	// Data is the event's data: the values of its data fields joined with
	// "\n".
	Data string
	// HasData reports whether the event had at least one data field.
	HasData bool
	// Retry is the reconnection time from the retry field.
	Retry time.Duration
	// HasRetry reports whether the event had a valid retry field (ASCII
	// digits only).
	HasRetry bool
	// Message is the JSON-RPC message in Data when Data is a JSON object, or
	// nil.
	Message *Message
	// Batch holds the messages when Data is a JSON array (a 2025-03-26
	// batch), or nil.
	Batch []Message
}

// Messages returns the JSON-RPC messages the event carries: none, the one in
// Message, or those in Batch.
func (e Event) Messages() []Message {
	switch {
	case e.Message != nil:
		return []Message{*e.Message}
	default:
		return e.Batch
	}
}

// SSEReader parses a text/event-stream body as the HTML Living Standard
// describes it: lines end with CRLF, LF or CR; a leading UTF-8 BOM is
// skipped; lines starting with ':' are comments; "field: value" loses one
// leading space from the value; data lines are joined with "\n"; a blank
// line ends an event. Lines may be of any length.
//
// An SSEReader is not safe for concurrent use.
type SSEReader struct {
	br          *bufio.Reader
	line        []byte
	skipLF      bool // the previous line ended with CR: ignore one LF
	bomChecked  bool
	lastEventID string
	err         error
}

// NewSSEReader returns a reader that parses events from r.
func NewSSEReader(r io.Reader) *SSEReader {
	return &SSEReader{br: bufio.NewReaderSize(r, 16<<10)}
}

// LastEventID returns the last event id seen, as an EventSource would send
// it in Last-Event-ID when reconnecting. An empty id field resets it.
func (r *SSEReader) LastEventID() string { return r.lastEventID }

// Next returns the next event. At the clean end of the input it returns
// io.EOF. If the input ends inside an event, it returns the partial event
// and [ErrIncompleteEvent]. Any other read error is returned as is. After an
// error every call returns the same error.
func (r *SSEReader) Next() (Event, error) {
	if r.err != nil {
		return Event{}, r.err
	}
	var (
		ev      Event
		data    []byte
		pending bool
	)
	for {
		line, err := r.readLine()
		if err == nil && len(line) == 0 {
			if pending {
				return r.finish(ev, data), nil
			}
			continue
		}
		if len(line) > 0 && r.field(line, &ev, &data) {
			pending = true
		}
		if err != nil {
			if err == io.EOF && pending {
				r.err = ErrIncompleteEvent
				return r.finish(ev, data), r.err
			}
			r.err = err
			return Event{}, err
		}
	}
}

// field applies one non-empty line to the event being built and reports
// whether the line was a field that makes the event worth reporting.
func (r *SSEReader) field(line []byte, ev *Event, data *[]byte) bool {
	if line[0] == ':' {
		return false // comment
	}
	name, value, found := bytes.Cut(line, []byte{':'})
	if found && len(value) > 0 && value[0] == ' ' {
		value = value[1:]
	}
	switch string(name) {
	case "event":
		ev.Name = string(value)
	case "data":
		*data = append(*data, value...)
		*data = append(*data, '\n')
		ev.HasData = true
	case "id":
		if bytes.IndexByte(value, 0) >= 0 {
			return false
		}
		ev.ID = string(value)
		ev.HasID = true
	case "retry":
		if len(value) == 0 {
			return false
		}
		for _, b := range value {
			if b < '0' || b > '9' {
				return false
			}
		}
		ms, err := strconv.ParseInt(string(value), 10, 64)
		if err != nil || ms > int64(time.Duration(1<<63-1)/time.Millisecond) {
			return false
		}
		ev.Retry = time.Duration(ms) * time.Millisecond
		ev.HasRetry = true
	default:
		return false
	}
	return true
}

func (r *SSEReader) finish(ev Event, data []byte) Event {
	if ev.HasID {
		r.lastEventID = ev.ID
	}
	if n := len(data); n > 0 && data[n-1] == '\n' {
		data = data[:n-1]
	}
	ev.Data = string(data)
	ev.Message, ev.Batch = parseMessages(data)
	return ev
}

// parseMessages decodes data as one JSON-RPC message or an array of them. It
// returns nils if data is not valid JSON of that shape.
func parseMessages(data []byte) (*Message, []Message) {
	trimmed := bytes.TrimLeft(data, " \t\r\n")
	if len(trimmed) == 0 {
		return nil, nil
	}
	switch trimmed[0] {
	case '{':
		var m Message
		if json.Unmarshal(data, &m) == nil {
			return &m, nil
		}
	case '[':
		var ms []Message
		if json.Unmarshal(data, &ms) == nil && ms != nil {
			return nil, ms
		}
	}
	return nil, nil
}

var bom = []byte{0xEF, 0xBB, 0xBF}

// readLine returns the next line without its terminator. At the end of the
// input it returns io.EOF, together with the unterminated last line if there
// is one. The returned slice is valid until the next call.
func (r *SSEReader) readLine() ([]byte, error) {
	r.line = r.line[:0]
	for {
		if _, err := r.br.Peek(1); err != nil {
			if errors.Is(err, io.EOF) {
				err = io.EOF
			}
			return r.line, err
		}
		if !r.bomChecked {
			r.bomChecked = true
			if err := r.skipBOM(); err != nil {
				return r.line, err
			}
			continue
		}
		buf, _ := r.br.Peek(r.br.Buffered())
		if r.skipLF {
			r.skipLF = false
			if buf[0] == '\n' {
				_, _ = r.br.Discard(1)
				continue
			}
		}
		i := bytes.IndexAny(buf, "\r\n")
		if i < 0 {
			r.line = append(r.line, buf...)
			_, _ = r.br.Discard(len(buf))
			continue
		}
		r.line = append(r.line, buf[:i]...)
		r.skipLF = buf[i] == '\r'
		_, _ = r.br.Discard(i + 1)
		return r.line, nil
	}
}

// skipBOM discards a leading UTF-8 byte order mark. It only waits for more
// input when what is buffered so far is a proper prefix of the mark.
func (r *SSEReader) skipBOM() error {
	buf, _ := r.br.Peek(r.br.Buffered())
	if len(buf) < len(bom) && bytes.HasPrefix(bom, buf) {
		var err error
		buf, err = r.br.Peek(len(bom))
		if err != nil && !errors.Is(err, io.EOF) {
			return err
		}
	}
	if bytes.HasPrefix(buf, bom) {
		_, _ = r.br.Discard(len(bom))
	}
	return nil
}

// ReadSSE returns an iterator over the events of a text/event-stream body.
// It yields each event with a nil error; it stops silently at the clean end
// of the input, and yields a final (partial event, [ErrIncompleteEvent]) or
// (Event{}, read error) pair otherwise. See [SSEReader] for the rules.
func ReadSSE(r io.Reader) iter.Seq2[Event, error] {
	sr := NewSSEReader(r)
	return func(yield func(Event, error) bool) {
		for {
			ev, err := sr.Next()
			if err == io.EOF {
				return
			}
			if !yield(ev, err) || err != nil {
				return
			}
		}
	}
}
