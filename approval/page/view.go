package page

import (
	"bytes"
	"embed"
	"encoding/json"
	"fmt"
	"html/template"
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/mcphandler/mcphandler/approval"
	"github.com/mcphandler/mcphandler/internal/canon"
)

// Status says which page a View is.
type Status string

// Statuses of a View.
const (
	StatusAsk        Status = "ask"         // the approval and its form
	StatusApproved   Status = "approved"    // this approver approved it now
	StatusDeclined   Status = "declined"    // this approver declined it now
	StatusNotAllowed Status = "not_allowed" // the policy refuses this approver
	StatusDecided    Status = "decided"     // someone decided it before
	StatusExpired    Status = "expired"     // nobody decided it in time
	StatusWithdrawn  Status = "withdrawn"   // the caller cancelled the call
	StatusError      Status = "error"       // bad input or a failure
)

// View is what the "page" template is executed with.
type View struct {
	Status Status
	// Title and Detail are set on error pages (StatusError).
	Title, Detail string
	// Approval is the approval shown: nil on error pages, and for an
	// approver the policy refuses (who may be of another workspace).
	Approval *ApprovalView
	// Approver is the signed-in person (zero on error pages).
	Approver approval.Identity
	// Reason says why the policy refuses (StatusNotAllowed).
	Reason string
	// CSRF and Action are the form's token and target (StatusAsk).
	CSRF, Action string
	// Inbox is the address of the inbox (<mount>/), linked from every
	// page but the error pages.
	Inbox string
}

// MaxInboxRows is how many approvals the inbox shows at most, newest
// first; the page says when more wait.
const MaxInboxRows = 100

// MaxSummaryBytes bounds the arguments shown in a row of the inbox: past
// it they are cut with a visible marker counting what is left out ("…
// (cut, N bytes more)"); the approval's own page shows them in full.
const MaxSummaryBytes = 600

// InboxView is what the "inbox" template is executed with: the approvals
// waiting for the signed-in person.
type InboxView struct {
	// Approver is the signed-in person.
	Approver approval.Identity
	// Rows are the approvals they may decide, newest first, at most
	// MaxInboxRows; each row's Summary is set.
	Rows []*ApprovalView
	// More reports that more wait than Rows shows; Max is MaxInboxRows.
	More bool
	Max  int
	// CSRF and Action are every row's form token and target (<mount>/).
	CSRF, Action string
	// Notice says what the decision just sent did ("" for none), in
	// plain words; Warn marks one that decided nothing.
	Notice string
	Warn   bool
}

// ApprovalView is an approval as shown: every text escaped so that
// nothing invisible or reordering reaches the page (see Visible).
type ApprovalView struct {
	ID      string
	State   approval.State
	Asker   approval.Identity
	Tool    string
	Message string
	// Arguments are the call's arguments, one per member of the canonical
	// arguments object, in canonical order (a single "arguments" entry
	// when they are not an object). Each value is canonical JSON; a value
	// past DescribeOptions' generous bounds is cut inside itself with a
	// visible marker counting what is left out, never silently.
	Arguments []Argument
	// Pretty are all the arguments, canonical and indented, never cut
	// (characters that are invisible or reorder text escaped as \uXXXX).
	Pretty string
	// Summary is Pretty cut after MaxSummaryBytes with a visible marker,
	// for a row of the inbox ("" elsewhere).
	Summary string
	// Hints say what kind of call it is, from the tool's annotations.
	Hints Hints
	// StateText is State in plain words ("Waiting for a decision", …).
	StateText string
	// TimeLeft says, at the moment the page was made, how long the
	// approval still waits ("expires in 4 min"); "" unless pending.
	TimeLeft  string
	Expires   time.Time
	DecidedBy approval.Identity
	Decided   time.Time
	// URL is the approval's own page.
	URL string
}

// Hints are the tool's annotations as the page states them: unset ones
// take the MCP defaults (destructive, open world).
type Hints struct {
	// Given: the tool gave hints; if false every field is a default.
	Given                                        bool
	ReadOnly, Destructive, OpenWorld, Idempotent bool
}

// Argument is one argument as shown: its value canonical and indented,
// never cut.
type Argument struct{ Name, Value string }

// stateWords are the states in plain words.
var stateWords = map[approval.State]string{
	approval.Pending:   "Waiting for a decision",
	approval.Approved:  "Approved — the call may run once",
	approval.Declined:  "Declined — the call does not run",
	approval.Expired:   "Expired — nobody decided in time; the call does not run",
	approval.Used:      "Approved and run",
	approval.Withdrawn: "Withdrawn by the caller",
}

// timeLeft says how long until exp, seen at now.
func timeLeft(now, exp time.Time) string {
	d := exp.Sub(now)
	switch {
	case d <= 0:
		return "expired"
	case d < time.Minute:
		return fmt.Sprintf("expires in %d s", int((d+time.Second-1)/time.Second))
	case d < time.Hour:
		return fmt.Sprintf("expires in %d min", int(d/time.Minute))
	}
	return fmt.Sprintf("expires in %d h %d min", int(d/time.Hour), int(d%time.Hour/time.Minute))
}

// cut returns s cut after max bytes (at a character's start) with a
// marker counting the bytes left out. The marker's "…" cannot come from
// the value: the rendering escapes it.
func cut(s string, max int) string {
	if len(s) <= max {
		return s
	}
	i := max
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return fmt.Sprintf("%s… (cut, %d bytes more)", s[:i], len(s)-i)
}

// pretty renders canonical JSON b in full, indented: canon.Describe with
// bounds no value can reach (nothing elided; invisible characters
// escaped), then indented.
func pretty(b []byte) string {
	n := len(b)
	s, err := canon.Describe(b, canon.DescribeOptions{Budget: 12*n + 64, StringRunes: n + 1, Items: n + 1})
	if err != nil {
		return "…[value too long to show]…"
	}
	var out bytes.Buffer
	if json.Indent(&out, []byte(s), "", "  ") != nil {
		return s
	}
	return out.String()
}

// viewOf is a as shown at now, its page at base+id.
func viewOf(a *approval.Approval, now time.Time, base string) *ApprovalView {
	if a == nil {
		return nil
	}
	v := &ApprovalView{ID: a.ID, State: a.State, Tool: Visible(a.Tool), Message: Visible(a.Message),
		Expires: a.Expires.UTC(), DecidedBy: visibleID(a.DecidedBy), Decided: a.Decided.UTC(), Asker: visibleID(a.Asker),
		Pretty: pretty(a.Arguments), StateText: stateWords[a.State], URL: base + a.ID,
		Hints: Hints{Given: a.Annotations != nil, Destructive: a.Annotations.IsDestructive(), OpenWorld: a.Annotations.IsOpenWorld()}}
	if a.Annotations != nil {
		v.Hints.ReadOnly, v.Hints.Idempotent = a.Annotations.ReadOnly, a.Annotations.Idempotent
	}
	if a.State == approval.Pending {
		v.TimeLeft = timeLeft(now, a.Expires)
	}
	var members map[string]json.RawMessage
	if json.Unmarshal(a.Arguments, &members) != nil || members == nil {
		v.Arguments = []Argument{{Name: "arguments", Value: v.Pretty}}
		return v
	}
	keys := make([]string, 0, len(members))
	for k := range members {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		v.Arguments = append(v.Arguments, Argument{Name: Visible(k), Value: pretty(members[k])})
	}
	return v
}

func visibleID(id approval.Identity) approval.Identity {
	return approval.Identity{Subject: Visible(id.Subject), Tenant: Visible(id.Tenant), Role: Visible(id.Role)}
}

// Visible returns s with every character that is not graphic (controls,
// format characters such as bidi overrides and zero-width ones,
// separators other than the space) escaped as \u{XXXX}, so that what is
// shown is what is there. Backslashes are escaped too.
func Visible(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '\\':
			b.WriteString(`\\`)
		case r == ' ' || (unicode.IsGraphic(r) && !unicode.Is(unicode.Zs, r) && r != '\u2800' && r != '\ufffd'):
			b.WriteRune(r)
		default:
			b.WriteString(`\u{` + strings.ToUpper(strconvHex(r)) + `}`)
		}
	}
	return b.String()
}

func strconvHex(r rune) string {
	const digits = "0123456789abcdef"
	if r == 0 {
		return "0"
	}
	var buf [8]byte
	i := len(buf)
	for r > 0 {
		i--
		buf[i] = digits[r&15]
		r >>= 4
	}
	return string(buf[i:])
}

//go:embed templates/*.html
var templateFS embed.FS

var defaultTemplates = template.Must(template.New("").Funcs(template.FuncMap{
	"time": func(t time.Time) string { return t.Format("2006-01-02 15:04:05 MST") },
}).ParseFS(templateFS, "templates/*.html"))

// render writes the page of v with status.
func (h *Handler) render(w http.ResponseWriter, status int, v *View) {
	if v.Status != StatusError {
		v.Inbox = h.base
	}
	h.execute(w, status, h.tmpl, "page", v)
}

// execute writes template name of t, executed with v, with status.
func (h *Handler) execute(w http.ResponseWriter, status int, t *template.Template, name string, v any) {
	var b strings.Builder
	if err := t.ExecuteTemplate(&b, name, v); err != nil {
		h.cfg.Logger.Error("page: template", "err", err)
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusInternalServerError)
		w.Write([]byte("The page cannot be shown.\n"))
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	w.Write([]byte(b.String()))
}

// fail writes an error page.
func (h *Handler) fail(w http.ResponseWriter, status int, title, detail string) {
	h.render(w, status, &View{Status: StatusError, Title: title, Detail: detail})
}
