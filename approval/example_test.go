package approval_test

import (
	"context"
	"fmt"

	"github.com/mcphandler/mcphandler/approval"
	"github.com/mcphandler/mcphandler/session"
)

// A call a client cannot ask about in-band: the first attempt gets the
// approval's URL, an admin of the workspace approves it on the page, the
// repeated call runs once, and a further identical call asks again.
func ExampleStore_Begin() {
	ctx := context.Background()
	store, err := approval.New(approval.Config{
		Store: session.NewMemory(), Keys: [][]byte{[]byte("a secret of at least thirty-two bytes")},
		URL: "https://app.example/approvals/", Roles: []string{"viewer", "editor", "admin"},
	})
	if err != nil {
		panic(err)
	}
	defer store.Close()
	editor := approval.Identity{Subject: "ed", Tenant: "acme", Role: "editor"}
	call := approval.Request{Asker: editor, Tool: "delete_note", Arguments: []byte(`{"id":"n1"}`),
		Policy: approval.Policy{MinRole: "admin"}}

	// tryCall is what the handler does with each attempt.
	tryCall := func() string {
		a, _, err := store.Begin(ctx, call)
		if err != nil {
			return err.Error()
		}
		if a.State != approval.Approved {
			return "approval required: " + string(a.State)
		}
		if _, err := store.Consume(ctx, a.ID, editor, call.Tool, call.Arguments); err != nil {
			return err.Error()
		}
		return "ran"
	}
	fmt.Println(tryCall())
	a, _, _ := store.Begin(ctx, call)
	// On the page (package approval/page), signed in as an admin of acme:
	if _, err := store.Decide(ctx, a.ID, approval.Identity{Subject: "ada", Tenant: "acme", Role: "admin"}, true); err != nil {
		panic(err)
	}
	fmt.Println(tryCall())
	fmt.Println(tryCall())
	// Output:
	// approval required: pending
	// ran
	// approval required: pending
}
