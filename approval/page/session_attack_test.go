package page

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcphandler/mcphandler/session"
)

// markCounter is a store that counts the sign-in marks written.
type markCounter struct {
	*session.Memory
	mu    sync.Mutex
	marks int
}

func (s *markCounter) PutIfAbsent(ctx context.Context, key string, value []byte, ttl time.Duration) (bool, error) {
	ok, err := s.Memory.PutIfAbsent(ctx, key, value, ttl)
	if ok && strings.HasPrefix(key, "approval-login/") {
		s.mu.Lock()
		s.marks++
		s.mu.Unlock()
	}
	return ok, err
}

func (s *markCounter) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.marks
}

// defaultMaxSignIns is the default of Config.MaxSignInsPerApproval.
const defaultMaxSignIns = 20

// TestAttackSignInMarks: a visitor who holds the URL of one approval (its
// caller, or anyone it was sent to; no sign-in needed) starts a sign-in
// and answers the callback itself, with the state the redirect named and
// a made-up code, again and again. Each callback used up its state with a
// mark kept in the store for LoginTTL: on main one per try, without end
// (100 tries, 100 marks). Now the page keeps at most
// Config.MaxSignInsPerApproval marks per approval within LoginTTL: past
// it the callback is refused with 429 before anything is written, and a
// sign-in to another approval is not affected.
func TestAttackSignInMarks(t *testing.T) {
	st := &markCounter{Memory: session.NewMemory()}
	e := newEnv(t, envOpt{shared: st})
	a := e.ask(`{"id":"n1"}`)
	try := func(i int) (int, string) {
		b := newBrowser(t).noRedirects()
		resp, err := b.c.Get(a.URL)
		if err != nil || resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("start %d: %v %v", i, err, resp)
		}
		resp.Body.Close()
		to, _ := url.Parse(resp.Header.Get("Location"))
		return b.get(e.srv.URL + "/approvals/callback?" + url.Values{"state": {to.Query().Get("state")}, "code": {"made-up"}}.Encode())
	}
	refused := 0
	for i := range 100 {
		code, body := try(i)
		switch {
		case code == http.StatusBadRequest && strings.Contains(body, "could not be verified"):
		case code == http.StatusTooManyRequests && strings.Contains(body, "Too many sign-ins") && strings.Contains(body, "Nothing was decided"):
			refused++
		default:
			t.Fatalf("try %d: %d\n%s", i, code, body)
		}
	}
	if n := st.count(); n != defaultMaxSignIns || refused != 100-defaultMaxSignIns {
		t.Fatalf("100 tries: %d sign-in marks kept, %d refused; want %d, %d", n, refused, defaultMaxSignIns, 100-defaultMaxSignIns)
	}
	other := e.ask(`{"id":"n2"}`)
	e.idp.SignInAs(admin)
	b := newBrowser(t)
	if code, body := b.get(other.URL); code != http.StatusOK || !strings.Contains(body, "Approve this call?") {
		t.Fatalf("a sign-in to another approval: %d\n%s", code, body)
	}
}
