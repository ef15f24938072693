package page

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mcphandler/mcphandler/approval"
	"github.com/mcphandler/mcphandler/internal/golden"
	"github.com/mcphandler/mcphandler/session"
)

// The golden files of testdata/golden hold, byte for byte, what the page
// keeps in the session store (the sign-ins of an approval and the marks of
// used sign-ins) and what it hands a browser that another replica reads
// back (its cookies and form token): during a rolling upgrade, replicas
// of two releases serve one approver. Each case builds its value through
// the Handler with fixed keys, times and ids, compares it with its file,
// then reads the file back as the Handler does.
//
// go test -run TestGolden -update rewrites the files: only for a change
// that says how mixed releases still interoperate.

var (
	goldenKeys = [][]byte{[]byte("mcphandler golden key, 32 bytes!")}
	// goldenUntil is when a golden sign-in stops counting: far ahead, as
	// the index reads the clock.
	goldenUntil = time.UnixMilli(4_102_444_800_000) // 2100-01-01T00:00:00Z
)

const (
	goldenID    = "GoldenApprovalId012345"
	goldenState = "GoldenLoginStateRandom"
)

func goldenSession() sessionCookie {
	return sessionCookie{Approval: goldenID, Subject: "ada", Tenant: "acme", Role: "admin", Nonce: "GoldenSessionNonceRand", Exp: goldenUntil.Unix()}
}

func goldenLogin() loginCookie {
	return loginCookie{Approval: goldenID, State: goldenState, Nonce: "GoldenLoginNonceRandom",
		Verifier: "golden-pkce-verifier-0123456789abcdefghijklmnopq", Exp: goldenUntil.Unix()}
}

// goldenInboxSession and goldenInboxLogin are the inbox's: no approval,
// the member "i".
func goldenInboxSession() sessionCookie {
	sc := goldenSession()
	sc.Approval, sc.Inbox = "", true
	return sc
}

func goldenInboxLogin() loginCookie {
	lc := goldenLogin()
	lc.Approval, lc.Inbox = "", true
	return lc
}

func goldenMark() string {
	sum := sha256.Sum256([]byte(goldenState))
	return hex.EncodeToString(sum[:])
}

// TestGolden pins what the page stores and what it gives a browser; see
// the comment at the top of this file.
func TestGolden(t *testing.T) {
	ctx := context.Background()
	// A replica as in production: HTTPS, __Host- cookies.
	replica := func(t *testing.T) (*Handler, *session.Memory) {
		st := session.NewMemory()
		e := newEnv(t, envOpt{shared: st, tls: true, mod: func(c *Config) { c.Keys = goldenKeys }})
		return e.h, st
	}
	for _, c := range []struct {
		name  string
		build func(t *testing.T, h *Handler, st *session.Memory) []byte
		check func(t *testing.T, h *Handler, st *session.Memory, b []byte)
	}{
		{
			name: "logins-index.golden",
			build: func(t *testing.T, h *Handler, st *session.Memory) []byte {
				if err := h.logins.Admit(ctx, "approval-logins/"+goldenID, goldenMark(), goldenUntil.UnixMilli(), nil); err != nil {
					t.Fatal(err)
				}
				b, err := st.Load(ctx, "approval-logins/"+goldenID)
				if err != nil {
					t.Fatal(err)
				}
				return b
			},
			check: func(t *testing.T, h *Handler, st *session.Memory, b []byte) {
				st.PutIfAbsent(ctx, "approval-logins/"+goldenID, b, time.Hour)
				live, err := h.logins.Live(ctx, "approval-logins/"+goldenID)
				if err != nil || len(live) != 1 || live[0].ID != goldenMark() || live[0].Until != goldenUntil.UnixMilli() {
					t.Errorf("Live: %+v, %v", live, err)
				}
			},
		},
		{
			name: "login-mark.golden",
			build: func(t *testing.T, h *Handler, st *session.Memory) []byte {
				if !h.useState(httptest.NewRecorder(), ctx, "approval-logins/"+goldenID, goldenState) {
					t.Fatal("useState refused a fresh sign-in")
				}
				b, err := st.Load(ctx, "approval-login/"+goldenMark())
				if err != nil {
					t.Fatal(err)
				}
				return b
			},
			check: func(t *testing.T, h *Handler, st *session.Memory, b []byte) {
				st.PutIfAbsent(ctx, "approval-login/"+goldenMark(), b, time.Hour)
				if h.useState(httptest.NewRecorder(), ctx, "approval-logins/"+goldenID, goldenState) {
					t.Error("a used sign-in is used again")
				}
			},
		},
		{
			name: "session-cookie.golden",
			build: func(t *testing.T, h *Handler, _ *session.Memory) []byte {
				sc := goldenSession()
				return []byte(h.encodeCookie(h.name, &sc))
			},
			check: func(t *testing.T, h *Handler, _ *session.Memory, b []byte) {
				var sc sessionCookie
				if !h.openCookie(h.name, string(b), &sc) || sc != goldenSession() {
					t.Errorf("cookie %+v", sc)
				}
			},
		},
		{
			name: "login-cookie.golden",
			build: func(t *testing.T, h *Handler, _ *session.Memory) []byte {
				lc := goldenLogin()
				return []byte(h.encodeCookie(h.name+"-login", &lc))
			},
			check: func(t *testing.T, h *Handler, _ *session.Memory, b []byte) {
				var lc loginCookie
				if !h.openCookie(h.name+"-login", string(b), &lc) || lc != goldenLogin() {
					t.Errorf("cookie %+v", lc)
				}
			},
		},
		{
			name: "csrf.golden",
			build: func(t *testing.T, h *Handler, _ *session.Memory) []byte {
				sc := goldenSession()
				return []byte(h.csrfToken(&sc))
			},
			check: func(t *testing.T, h *Handler, _ *session.Memory, b []byte) {
				sc := goldenSession()
				if h.csrfToken(&sc) != string(b) {
					t.Errorf("the form token %q is not the session's", b)
				}
			},
		},
		{
			name: "inbox-session-cookie.golden",
			build: func(t *testing.T, h *Handler, _ *session.Memory) []byte {
				sc := goldenInboxSession()
				return []byte(h.encodeCookie(h.name, &sc))
			},
			check: func(t *testing.T, h *Handler, _ *session.Memory, b []byte) {
				var sc sessionCookie
				if !h.openCookie(h.name, string(b), &sc) || sc != goldenInboxSession() || !sc.valid() || !sc.covers(goldenID) {
					t.Errorf("cookie %+v", sc)
				}
			},
		},
		{
			name: "inbox-login-cookie.golden",
			build: func(t *testing.T, h *Handler, _ *session.Memory) []byte {
				lc := goldenInboxLogin()
				return []byte(h.encodeCookie(h.name+"-login", &lc))
			},
			check: func(t *testing.T, h *Handler, _ *session.Memory, b []byte) {
				var lc loginCookie
				if !h.openCookie(h.name+"-login", string(b), &lc) || lc != goldenInboxLogin() || !lc.valid() {
					t.Errorf("cookie %+v", lc)
				}
			},
		},
		{
			name: "inbox-csrf.golden",
			build: func(t *testing.T, h *Handler, _ *session.Memory) []byte {
				sc := goldenInboxSession()
				return []byte(h.csrfToken(&sc))
			},
			check: func(t *testing.T, h *Handler, _ *session.Memory, b []byte) {
				sc, one := goldenInboxSession(), goldenSession()
				if h.csrfToken(&sc) != string(b) || h.csrfToken(&one) == string(b) {
					t.Errorf("the form token %q is not the inbox session's alone", b)
				}
			},
		},
		{
			// The index of a person's inbox sign-ins (keys.golden holds
			// the keys before the inbox).
			name: "inbox-keys.golden",
			build: func(t *testing.T, h *Handler, _ *session.Memory) []byte {
				return []byte("inbox sign-ins of a person = " + inboxLoginsKey(approval.Identity{Subject: "ada", Tenant: "acme"}) + "\n")
			},
			check: func(t *testing.T, h *Handler, st *session.Memory, b []byte) {
				key := inboxLoginsKey(approval.Identity{Subject: "ada", Tenant: "acme"})
				if string(b) != "inbox sign-ins of a person = "+key+"\n" || !h.useState(httptest.NewRecorder(), ctx, key, goldenState) {
					t.Errorf("keys %q", b)
				}
			},
		},
		{
			name: "keys.golden",
			build: func(t *testing.T, h *Handler, _ *session.Memory) []byte {
				var b strings.Builder
				for _, kv := range [][2]string{
					{"sign-ins of an approval", "approval-logins/" + goldenID},
					{"used sign-in", "approval-login/" + goldenMark()},
					{"session cookie", h.name},
					{"login cookie", h.name + "-login"},
					{"purposes", "approval-page-cookie approval-page-csrf approval-page-logins"},
				} {
					fmt.Fprintf(&b, "%s = %s\n", kv[0], kv[1])
				}
				return []byte(b.String())
			},
			check: func(t *testing.T, h *Handler, _ *session.Memory, b []byte) {
				if !strings.Contains(string(b), "session cookie = __Host-mcphandler-approval\n") || !validMark(goldenMark()) {
					t.Errorf("keys %q", b)
				}
			},
		},
	} {
		t.Run(strings.TrimSuffix(c.name, ".golden"), func(t *testing.T) {
			h, st := replica(t)
			want := golden.File(t, c.name, c.build(t, h, st))
			h, st = replica(t)
			c.check(t, h, st, want)
		})
	}
}
