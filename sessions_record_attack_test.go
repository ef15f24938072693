package mcphandler_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/elicitation"
	"github.com/mcphandler/mcphandler/mcptest"
	"github.com/mcphandler/mcphandler/session"
)

// A session's record names its owner, and a request of any other identity
// reads the session as unknown; the record is not signed. Someone who can
// write the store and also holds an account of its own writes the
// victim's session again with itself as the owner, then, through that
// session and with its own token, answers the question a tool of the
// victim waits for (its id is in the victim's event log, which the store
// holds) and cancels the victim's call. Neither may reach the victim's
// call.
func TestAttackSessionOwnerRewritten(t *testing.T) {
	eachStore(t, func(t *testing.T, stores func(int) session.Store) {
		answers := make(chan string, 2)
		tool := mcphandler.Tool{Name: "ask", Handler: func(ctx context.Context, call *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
			res, err := call.Exchange.Elicit(ctx, mcphandler.ElicitRequest{Message: "Proceed?", Schema: elicitation.Confirm("ok", "OK")})
			answers <- fmt.Sprint(res.Content, err)
			return mcphandler.TextResult("asked"), nil
		}}
		_, st, srv := sharedHandler(t, stores(0), []mcphandler.Tool{tool}, nil)
		ctx := context.Background()
		// It declares elicitation; its questions are read off the stream below.
		victim := mcptest.Dial(srv.URL, mcptest.WithToken("acme-viewer"), mcptest.WithAutoResume(false),
			mcptest.WithElicitationHandler(func(context.Context, mcptest.ElicitParams) (mcptest.ElicitResult, error) {
				return mcptest.ElicitResult{Action: "cancel"}, nil
			}))
		defer victim.Close()
		if _, err := victim.Initialize(ctx); err != nil {
			t.Fatal(err)
		}
		cctx, cancel := context.WithCancel(ctx)
		defer cancel()
		resp, err := victim.Post(cctx, []byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"ask"}}`), nil)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		rd := mcptest.NewSSEReader(resp.Body)
		var question *mcptest.Message
		for question == nil {
			ev, err := rd.Next()
			if err != nil {
				t.Fatalf("the call's stream: %v", err)
			}
			if m := ev.Message; m != nil && m.Method == "elicitation/create" {
				question = m
			}
		}
		// The victim's session, written again with the attacker as owner.
		sid := victim.SessionID()
		s, err := st.Store.Get(ctx, sid)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Store.Delete(ctx, sid); err != nil {
			t.Fatal(err)
		}
		s.Owner = "6:globex/carol"
		if err := st.Store.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
		attacker := mcptest.Dial(srv.URL, mcptest.WithToken("globex-editor"))
		defer attacker.Close()
		attacker.SetSessionID(sid)
		attacker.SetProtocolVersion(victim.ProtocolVersion())
		answerErr := attacker.Respond(ctx, question.ID, map[string]any{"action": "accept", "content": map[string]any{"ok": true}})
		cancelErr := attacker.Notify(ctx, "notifications/cancelled", map[string]any{"requestId": 7})
		select {
		case got := <-answers:
			t.Fatalf("the victim's tool got the attacker's answer: %s (answer %v, cancel %v)", got, answerErr, cancelErr)
		case <-time.After(300 * time.Millisecond):
		}
		if answerErr == nil {
			t.Fatal("an answer through a session of another identity was accepted")
		}
		// The record written back as it was, the victim's own answer still
		// reaches its call, which was not cancelled.
		st.Store.Delete(ctx, sid)
		s.Owner = "4:acme/alice"
		if err := st.Store.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
		if err := victim.Respond(ctx, question.ID, map[string]any{"action": "decline"}); err != nil {
			t.Fatalf("the victim's answer: %v", err)
		}
		if got := <-answers; got != "map[] <nil>" {
			t.Fatalf("the victim's tool got %s", got)
		}
	})
}
