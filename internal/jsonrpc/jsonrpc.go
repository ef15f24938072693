// Package jsonrpc holds the JSON-RPC 2.0 framing shared by the transports:
// decoding one incoming message (or a batch) and encoding responses,
// requests and notifications without reflection on the hot path.
package jsonrpc

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"unicode/utf8"
)

// Standard JSON-RPC error codes.
const (
	CodeParseError     = -32700
	CodeInvalidRequest = -32600
	CodeMethodNotFound = -32601
	CodeInvalidParams  = -32602
	CodeInternalError  = -32603
)

// Message is one decoded JSON-RPC message: a request (ID and Method), a
// notification (Method only) or a response (ID and Result or Error).
type Message struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *Error          `json:"error,omitempty"`
}

// Kind says what a valid message is.
type Kind int

const (
	KindRequest Kind = iota + 1
	KindNotification
	KindResponse
)

// Error is a JSON-RPC error object.
type Error struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (e *Error) Error() string { return "jsonrpc: " + strconv.Itoa(e.Code) + " " + e.Message }

// ErrNotObject reports a body that is valid JSON but neither an object nor
// an array of objects.
var ErrNotObject = errors.New("jsonrpc: message is not a JSON object")

// IsBatch reports whether body (already known to be valid JSON) is an array.
func IsBatch(body []byte) bool {
	b := bytes.TrimLeft(body, " \t\r\n")
	return len(b) > 0 && b[0] == '['
}

// Decode parses one message. A syntax error is reported as *json.SyntaxError
// (or io.ErrUnexpectedEOF); any other failure means the JSON was well formed
// but not a message.
//
// It reads what json.Unmarshal would, in a walk of the members (see
// [Members]) after a validity check, with one copy of body that the raw
// members share; anything but a well-formed object takes encoding/json.
func Decode(body []byte, m *Message) error {
	if ok, err := decodeFast(body, m, false); ok {
		return err
	}
	return decodeSlow(body, m)
}

// DecodeValid is Decode of a body the caller has already found to be
// valid JSON, as json.Valid would (canon.Check does): it skips that check.
// Given anything else it decodes what it can, wrongly; so never call it on
// unchecked bytes.
func DecodeValid(body []byte, m *Message) error {
	if ok, err := decodeFast(body, m, true); ok {
		return err
	}
	return decodeSlow(body, m)
}

// decodeSlow is Decode by encoding/json.
func decodeSlow(body []byte, m *Message) error {
	if err := json.Unmarshal(body, m); err != nil {
		var syn *json.SyntaxError
		if errors.As(err, &syn) {
			return err
		}
		if !json.Valid(body) {
			return &json.SyntaxError{}
		}
		return ErrNotObject
	}
	return nil
}

// DecodeMembers is DecodeValid of a body whose top-level value is an
// object with the given members (offsets of each key and value, as
// canon.CheckMembers finds them, all of them, in order): it reads them
// without walking the body again. Given anything else it decodes wrongly.
func DecodeMembers(body []byte, members [][4]int32, m *Message) error {
	d := envelope{m: m}
	own := bytes.Clone(body)
	for _, mb := range members {
		// The members share own: an append must not spill into the next.
		d.member(own[mb[0]:mb[1]], own[mb[2]:mb[3]:mb[3]])
	}
	return d.result()
}

// decodeFast decodes an object body into m as json.Unmarshal would; ok is
// false, m untouched, when body is not valid JSON or not an object. valid
// says the caller has checked that body is valid JSON.
func decodeFast(body []byte, m *Message, valid bool) (ok bool, err error) {
	i := skipSpace(body, 0)
	if i >= len(body) || body[i] != '{' || !valid && !json.Valid(body) {
		return false, nil
	}
	d := envelope{m: m}
	Members(bytes.Clone(body), func(k, v []byte) bool {
		d.member(k, v[:len(v):len(v)]) // the members share one copy: an append must not spill into the next
		return true
	})
	return true, d.result()
}

// envelope decodes the members of a message into m, as json.Unmarshal
// would into a Message: by envelopeKey, the last of a repeated key
// winning.
type envelope struct {
	m       *Message
	typeErr bool // a member had the wrong type
}

func (d *envelope) member(k, v []byte) {
	switch envelopeKey(k) {
	case "jsonrpc":
		d.str(v, &d.m.JSONRPC)
	case "id":
		d.m.ID = v
	case "method":
		d.str(v, &d.m.Method)
	case "params":
		d.m.Params = v
	case "result":
		d.m.Result = v
	case "error":
		d.typeErr = decodeError(v, &d.m.Error) || d.typeErr
	}
}

// str decodes the string member v into *dst (null sets nothing).
func (d *envelope) str(v []byte, dst *string) {
	if string(v) == "null" {
		return
	}
	if c, ok := interned[string(v[1:max(len(v)-1, 1)])]; ok && v[0] == '"' {
		*dst = c // plain ASCII: the bytes are the string
		return
	}
	if s, ok := String(v); ok {
		*dst = intern(s)
	} else {
		d.typeErr = true
	}
}

func (d *envelope) result() error {
	if d.typeErr {
		return ErrNotObject
	}
	return nil
}

// envelopeFields are the members of a message, as KeyIs names them.
var envelopeFields = [...]string{"jsonrpc", "id", "method", "params", "result", "error"}

// envelopeKey returns the member of a message the quoted key names (as
// KeyIs matches it), or "".
func envelopeKey(key []byte) string {
	if i := KeyIndex(key, envelopeFields[:]...); i >= 0 {
		return envelopeFields[i]
	}
	return ""
}

// decodeError decodes the error member v into *e as json.Unmarshal would
// (into the Error *e points to, if any), and reports a type error.
func decodeError(v []byte, e **Error) bool {
	if string(v) == "null" {
		*e = nil
		return false
	}
	if v[0] != '{' {
		return true
	}
	if *e == nil {
		*e = new(Error)
	}
	return json.Unmarshal(v, *e) != nil
}

// interned are the strings of the envelope that need no allocation.
var interned = map[string]string{"2.0": "2.0"}

func init() {
	for _, s := range []string{"initialize", "ping", "tools/list", "tools/call", "resources/list",
		"resources/read", "resources/templates/list", "resources/subscribe", "resources/unsubscribe",
		"prompts/list", "prompts/get", "completion/complete", "logging/setLevel", "server/discover",
		"subscriptions/listen", "notifications/initialized", "notifications/cancelled",
		"notifications/progress", "notifications/roots/list_changed"} {
		interned[s] = s
	}
}

func intern(s string) string {
	if c, ok := interned[s]; ok {
		return c
	}
	return s
}

// DecodeBatch parses an array of messages. Each element is kept raw so that
// one malformed element does not spoil the others.
func DecodeBatch(body []byte) ([]json.RawMessage, error) {
	var elems []json.RawMessage
	if err := json.Unmarshal(body, &elems); err != nil {
		return nil, err
	}
	return elems, nil
}

// Validate checks the envelope and returns its kind, or an Invalid Request
// error describing what is wrong.
func (m *Message) Validate() (Kind, *Error) {
	if m.JSONRPC != "2.0" {
		return 0, &Error{Code: CodeInvalidRequest, Message: `Invalid Request: "jsonrpc" must be "2.0"`}
	}
	hasID := len(m.ID) > 0
	if hasID && !ValidID(m.ID) {
		return 0, &Error{Code: CodeInvalidRequest, Message: "Invalid Request: id must be a string or an integer"}
	}
	switch {
	case m.Method != "":
		if m.Result != nil || m.Error != nil {
			return 0, &Error{Code: CodeInvalidRequest, Message: "Invalid Request: a request carries no result or error"}
		}
		if len(m.Params) > 0 && m.Params[0] != '{' {
			if !bytes.Equal(m.Params, []byte("null")) {
				return 0, &Error{Code: CodeInvalidRequest, Message: "Invalid Request: params must be an object"}
			}
			m.Params = nil
		}
		if hasID {
			return KindRequest, nil
		}
		return KindNotification, nil
	case hasID && (m.Result != nil) != (m.Error != nil):
		return KindResponse, nil
	default:
		return 0, &Error{Code: CodeInvalidRequest, Message: "Invalid Request: not a request, notification or response"}
	}
}

// ValidID reports whether id is a JSON string or an integer (MCP forbids
// null ids). id must not be empty.
func ValidID(id json.RawMessage) bool {
	switch c := id[0]; {
	case c == '"':
		return true
	case c == '-' || (c >= '0' && c <= '9'):
		for _, b := range id[1:] {
			if b < '0' || b > '9' {
				return false
			}
		}
		return len(id) > 1 || c != '-'
	}
	return false
}

// AppendResult appends a result response to dst.
func AppendResult(dst []byte, id json.RawMessage, result []byte) []byte {
	dst = append(dst, `{"jsonrpc":"2.0","id":`...)
	dst = append(dst, id...)
	dst = append(dst, `,"result":`...)
	dst = append(dst, result...)
	return append(dst, '}')
}

// AppendError appends an error response to dst. A nil id is written as
// null, which the spec allows when the request id could not be read.
func AppendError(dst []byte, id json.RawMessage, e *Error) []byte {
	dst = append(dst, `{"jsonrpc":"2.0","id":`...)
	if len(id) == 0 {
		dst = append(dst, "null"...)
	} else {
		dst = append(dst, id...)
	}
	dst = append(dst, `,"error":{"code":`...)
	dst = strconv.AppendInt(dst, int64(e.Code), 10)
	dst = append(dst, `,"message":`...)
	dst = appendString(dst, e.Message)
	if len(e.Data) > 0 {
		dst = append(dst, `,"data":`...)
		dst = append(dst, e.Data...)
	}
	return append(dst, "}}"...)
}

// AppendRequest appends a request (or, with a nil id, a notification).
func AppendRequest(dst []byte, id json.RawMessage, method string, params []byte) []byte {
	dst = append(dst, `{"jsonrpc":"2.0",`...)
	if len(id) > 0 {
		dst = append(dst, `"id":`...)
		dst = append(dst, id...)
		dst = append(dst, ',')
	}
	dst = append(dst, `"method":`...)
	dst = appendString(dst, method)
	if len(params) > 0 {
		dst = append(dst, `,"params":`...)
		dst = append(dst, params...)
	}
	return append(dst, '}')
}

// appendString appends s as a JSON string, byte for byte as json.Marshal
// writes it (HTML-safe, invalid UTF-8 as U+FFFD, U+2028 and U+2029
// escaped), without its reflection and allocation.
func appendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			i++
			if plainByte[c] {
				continue
			}
			dst = append(dst, s[start:i-1]...)
			start = i
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default: // the other control bytes, and <, > and &
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
		case r == '\u2028' || r == '\u2029': // valid JSON, not valid JavaScript
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

const hexDigits = "0123456789abcdef"

// plainByte tells the ASCII bytes a JSON string holds as they are: all but
// the control bytes, the quote, the backslash, and <, > and &, which
// encoding/json escapes so that its output is safe inside HTML.
var plainByte = func() (t [utf8.RuneSelf]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
	}
	return t
}()

// AppendString appends s as a JSON string.
func AppendString(dst []byte, s string) []byte { return appendString(dst, s) }
