package upstream

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"
)

// event is one Server-Sent Event with data.
type event struct {
	name  string // the event field; "" is the default, "message"
	data  []byte // the data lines joined with "\n"
	id    string // the last id field seen so far on the stream
	retry time.Duration
}

// sseReader reads a text/event-stream body as the HTML standard says
// (lines end with CRLF, LF or CR; a leading BOM is skipped; a line starting
// with ':' is a comment; one space after the colon is dropped; data lines
// are joined with "\n"; a blank line ends an event), within bounds: no
// line longer than maxLine bytes, no event's data longer than maxEvent
// bytes, either being ErrTooLarge; the total is bounded by the reader it
// reads (limitReader). An event with empty data or none (a priming event,
// a retry) is not returned, but its id and retry fields are kept. It never holds more
// than maxLine plus maxEvent bytes plus its buffer. Not safe for
// concurrent use.
type sseReader struct {
	r        io.Reader
	buf      []byte // read but not yet consumed: buf[off:n]
	off, n   int
	maxLine  int
	maxEvent int
	line     []byte
	skipLF   bool // the last line ended with CR: a following LF is part of it
	started  bool // the BOM check is done
	lastID   string
	retry    time.Duration
	err      error
}

func newSSEReader(r io.Reader, maxLine, maxEvent int) *sseReader {
	return &sseReader{r: r, buf: make([]byte, 8<<10), maxLine: maxLine, maxEvent: maxEvent}
}

// errIncomplete is returned when the stream ends inside an event: the
// event is lost, as a browser would lose it.
var errIncomplete = errors.New("upstream: SSE stream ended inside an event")

// next returns the next event with data. At the end of the stream it
// returns io.EOF (or errIncomplete, when it ends inside an event); after
// any error it returns that error again.
func (r *sseReader) next() (event, error) {
	if r.err != nil {
		return event{}, r.err
	}
	var (
		ev      event
		data    []byte
		hasData bool
		pending bool
	)
	for {
		line, err := r.readLine()
		if err != nil {
			if err == io.EOF && (pending || len(line) > 0) {
				err = errIncomplete
			}
			r.err = err
			return event{}, err
		}
		if len(line) == 0 {
			if n := len(data); hasData && n > 1 {
				// An event whose data is empty (a priming event) is not
				// dispatched, as in a browser.
				ev.data, ev.id, ev.retry = data[:n-1], r.lastID, r.retry // without the last "\n"
				return ev, nil
			}
			ev, data, hasData, pending = event{}, data[:0], false, false
			continue
		}
		if line[0] == ':' {
			continue // a comment (a keep-alive)
		}
		pending = true
		name, value, found := bytes.Cut(line, []byte{':'})
		if found && len(value) > 0 && value[0] == ' ' {
			value = value[1:]
		}
		switch string(name) {
		case "event":
			ev.name = string(value)
		case "data":
			if len(data)+len(value)+1 > r.maxEvent {
				r.err = fmt.Errorf("%w: an SSE event of more than %d bytes", ErrTooLarge, r.maxEvent)
				return event{}, r.err
			}
			data = append(data, value...)
			data = append(data, '\n')
			hasData = true
		case "id":
			if bytes.IndexByte(value, 0) < 0 && len(value) <= maxEventID {
				r.lastID = string(value)
			}
		case "retry":
			if ms, err := strconv.ParseUint(string(value), 10, 31); err == nil {
				r.retry = time.Duration(ms) * time.Millisecond
			}
		}
	}
}

var bom = []byte{0xEF, 0xBB, 0xBF}

// readLine returns the next line without its end. A line longer than
// maxLine is ErrTooLarge. At the end of the input it returns io.EOF with
// what the unterminated last line held. The slice is valid until the next
// call.
func (r *sseReader) readLine() ([]byte, error) {
	r.line = r.line[:0]
	for {
		if r.off == r.n {
			if err := r.fill(); err != nil {
				return r.line, err
			}
			continue
		}
		b := r.buf[r.off:r.n]
		if !r.started {
			if len(b) < len(bom) && bytes.HasPrefix(bom, b) {
				if err := r.fill(); err == nil {
					continue
				} else if err != io.EOF {
					return r.line, err
				}
			}
			r.started = true
			if bytes.HasPrefix(b, bom) {
				r.off += len(bom)
				continue
			}
		}
		if r.skipLF {
			r.skipLF = false
			if b[0] == '\n' {
				r.off++
				continue
			}
		}
		i := bytes.IndexAny(b, "\r\n")
		if i < 0 {
			i = len(b)
		}
		if len(r.line)+i > r.maxLine {
			return nil, fmt.Errorf("%w: an SSE line of more than %d bytes", ErrTooLarge, r.maxLine)
		}
		r.line = append(r.line, b[:i]...)
		if i == len(b) {
			r.off = r.n
			continue
		}
		r.skipLF = b[i] == '\r'
		r.off += i + 1
		return r.line, nil
	}
}

// fill reads more input into buf, keeping what is not consumed.
func (r *sseReader) fill() error {
	if r.off > 0 {
		r.n = copy(r.buf, r.buf[r.off:r.n])
		r.off = 0
	}
	if r.n == len(r.buf) {
		return errors.New("upstream: SSE buffer full") // unreachable: fill is called with the buffer consumed
	}
	for {
		n, err := r.r.Read(r.buf[r.n:])
		r.n += n
		if n > 0 {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// limitReader reads from r while the budget it shares (with the other
// readers of one request's reconnections) lasts; reading more is
// ErrTooLarge, naming what the budget was for.
type limitReader struct {
	r    io.Reader
	left *int64 // bytes left of the budget
	what string
	max  int64
}

func (l *limitReader) Read(p []byte) (int, error) {
	if *l.left <= 0 {
		// One byte more tells a body that ends exactly at the limit from one
		// that goes on.
		var one [1]byte
		if n, err := l.r.Read(one[:]); n == 0 && err != nil {
			return 0, err
		}
		return 0, fmt.Errorf("%w: %s of more than %d bytes", ErrTooLarge, l.what, l.max)
	}
	if int64(len(p)) > *l.left {
		p = p[:*l.left]
	}
	n, err := l.r.Read(p)
	*l.left -= int64(n)
	return n, err
}
