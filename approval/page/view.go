package page

import (
	"embed"
	"encoding/json"
	"html/template"
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode"

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
	Expires   time.Time
	DecidedBy approval.Identity
	Decided   time.Time
}

// Argument is one argument as shown.
type Argument struct{ Name, Value string }

// describe are the bounds of an argument value on the page: far above
// what an approval holds (64 KiB by default), so that only an exceptional
// value is cut, and then visibly.
var describe = canon.DescribeOptions{Budget: 200_000, StringRunes: 100_000, Items: 10_000}

func viewOf(a *approval.Approval) *ApprovalView {
	if a == nil {
		return nil
	}
	v := &ApprovalView{ID: a.ID, State: a.State, Tool: Visible(a.Tool), Message: Visible(a.Message),
		Expires: a.Expires.UTC(), DecidedBy: visibleID(a.DecidedBy), Decided: a.Decided.UTC(), Asker: visibleID(a.Asker)}
	var members map[string]json.RawMessage
	if json.Unmarshal(a.Arguments, &members) != nil || members == nil {
		v.Arguments = []Argument{{Name: "arguments", Value: describeValue(a.Arguments)}}
		return v
	}
	keys := make([]string, 0, len(members))
	for k := range members {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		v.Arguments = append(v.Arguments, Argument{Name: Visible(k), Value: describeValue(members[k])})
	}
	return v
}

func describeValue(b []byte) string {
	s, err := canon.Describe(b, describe)
	if err != nil {
		return "…[value too long to show]…"
	}
	return s
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

//go:embed templates/page.html
var templateFS embed.FS

var defaultTemplates = template.Must(template.New("").Funcs(template.FuncMap{
	"time": func(t time.Time) string { return t.Format("2006-01-02 15:04:05 MST") },
}).ParseFS(templateFS, "templates/page.html"))

// render writes the page of v with status.
func (h *Handler) render(w http.ResponseWriter, status int, v *View) {
	var b strings.Builder
	if err := h.tmpl.ExecuteTemplate(&b, "page", v); err != nil {
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
