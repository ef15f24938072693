package page

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/mcphandler/mcphandler/approval"
)

// The inbox, at the mount itself (<mount>/), lists the approvals waiting
// for the signed-in person, with a decision form on each row
// (approval.Store.Inbox: those of their tenant whose policy admits them,
// newest first, at most MaxInboxRows). Its sign-in is a session of its
// own (sessionCookie.Inbox), which decides any approval its person may
// decide, here or on the approval's page; a session made for one
// approval decides only that one, and is not the inbox's. A decision
// sent from the inbox passes the checks of the approval page's, in the
// same order — cross-origin, the form (at most MaxFormBytes, exactly one
// decision, one token and one id), an inbox session, its CSRF token —
// and is then made by approval.Store.Decide, which checks the policy and
// the state atomically. Its outcome, whatever it is (decided, decided or
// expired meanwhile, not allowed, not found), is a line on top of the
// inbox, read afresh.

// inbox answers GET <mount>/.
func (h *Handler) inbox(w http.ResponseWriter, r *http.Request) {
	sess, ok := h.session(r)
	if !ok || !sess.Inbox {
		h.login(w, r, "")
		return
	}
	h.showInbox(w, r, sess, http.StatusOK, "", false)
}

// showInbox writes the inbox of sess with status and a notice.
func (h *Handler) showInbox(w http.ResponseWriter, r *http.Request, sess *sessionCookie, status int, notice string, warn bool) {
	who := sess.identity()
	list, more, err := h.cfg.Approvals.Inbox(r.Context(), who, MaxInboxRows)
	if err != nil {
		h.cfg.Logger.Error("page: approval store", "err", err)
		h.fail(w, http.StatusServiceUnavailable, "Unavailable", "The approvals cannot be read right now; try again in a moment.")
		return
	}
	v := &InboxView{Approver: visibleID(who), More: more, Max: MaxInboxRows, CSRF: h.csrfToken(sess), Action: h.base,
		Notice: notice, Warn: warn}
	now := time.Now()
	for _, a := range list {
		row := viewOf(a, now, h.base)
		row.Summary = cut(row.Pretty, MaxSummaryBytes)
		v.Rows = append(v.Rows, row)
	}
	h.execute(w, status, h.inboxT, "inbox", v)
}

// decideInbox answers POST <mount>/: a decision from a row of the inbox.
// Every check comes before the one call that decides.
func (h *Handler) decideInbox(w http.ResponseWriter, r *http.Request) {
	if err := h.cop.Check(r); err != nil {
		h.fail(w, http.StatusForbidden, "Cross-site request refused", "The decision must be sent from the approval page itself. Nothing was decided.")
		return
	}
	approve, token, msg := readForm(w, r)
	if msg == "" && len(r.PostForm["id"]) != 1 {
		msg = "The form must name one approval."
	}
	if msg != "" {
		h.fail(w, http.StatusBadRequest, "Bad request", msg+" Nothing was decided.")
		return
	}
	id := r.PostForm.Get("id")
	sess, ok := h.session(r)
	switch {
	case !ok:
		h.fail(w, http.StatusUnauthorized, "Not signed in", "Your sign-in is missing or expired: open the inbox again. Nothing was decided.")
		return
	case !sess.Inbox:
		h.fail(w, http.StatusForbidden, "Wrong sign-in", "Your sign-in is for one approval, not for the inbox: open the inbox again. Nothing was decided.")
		return
	case !hmacEqual(token, h.csrfToken(sess)):
		h.fail(w, http.StatusForbidden, "Form expired", "The form does not match your sign-in: open the inbox again. Nothing was decided.")
		return
	case !approval.ValidID(id):
		h.fail(w, http.StatusBadRequest, "Bad request", "The form names no approval. Nothing was decided.")
		return
	}
	who := sess.identity()
	a, err := h.cfg.Approvals.Decide(r.Context(), id, who, approve)
	if err == nil {
		h.cfg.Logger.Info("page: approval decided", "approval", id, "state", string(a.State), "tool", a.Tool,
			"asker", a.Asker.Subject, "tenant", a.Asker.Tenant, "approver", who.Subject, "approverTenant", who.Tenant, "from", "inbox")
	}
	status, notice, warn := h.outcome(r, who, a, err)
	if status == 0 {
		h.storeFailed(w, err)
		return
	}
	h.showInbox(w, r, sess, status, notice, warn)
}

// outcome says in plain words what the decision Decide returned did, and
// with which status; 0 for a failure of the store. Nothing of the call is
// said to someone its policy refuses.
func (h *Handler) outcome(r *http.Request, who approval.Identity, a *approval.Approval, err error) (int, string, bool) {
	var v *ApprovalView
	if a != nil {
		v = h.shown(a, h.cfg.Approvals.Check(r.Context(), a, who))
	}
	switch {
	case err == nil && a.State == approval.Approved:
		return http.StatusOK, fmt.Sprintf("Approved: %s, asked by %s. The call may run once.", v.Tool, v.Asker.Subject), false
	case err == nil:
		return http.StatusOK, fmt.Sprintf("Declined: %s, asked by %s. The call does not run.", v.Tool, v.Asker.Subject), false
	case errors.Is(err, approval.ErrNotFound):
		return http.StatusNotFound, "That approval is not found: it ended, or it never was. Nothing was decided.", true
	case errors.Is(err, approval.ErrNotAllowed):
		return http.StatusForbidden, "You may not decide that call. " + reasonOf(err) + " Nothing was decided.", true
	case errors.Is(err, approval.ErrDecided) && v != nil:
		return http.StatusConflict, fmt.Sprintf("Someone decided %s, asked by %s, before you: %s (by %s). Your decision changed nothing.",
			v.Tool, v.Asker.Subject, v.StateText, v.DecidedBy.Subject), true
	case errors.Is(err, approval.ErrDecided):
		return http.StatusConflict, "That call was decided before you. Your decision changed nothing.", true
	case errors.Is(err, approval.ErrExpired):
		return http.StatusGone, "That call expired before your decision: nobody can decide it now, and it does not run.", true
	case errors.Is(err, approval.ErrWithdrawn):
		return http.StatusGone, "The caller withdrew that call before your decision: there is nothing to decide.", true
	}
	return 0, "", false
}
