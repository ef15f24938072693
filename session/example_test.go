package session_test

import (
	"context"
	"fmt"

	"github.com/mcphandler/mcphandler/session"
)

// countingPubSub wraps the PubSub part of a store and counts what it
// publishes; the other parts are used as they are.
type countingPubSub struct {
	session.PubSub
	published int
}

func (p *countingPubSub) Publish(ctx context.Context, channel string, msg []byte) (int, error) {
	p.published++
	return p.PubSub.Publish(ctx, channel, msg)
}

// A Store is composed of four parts, each of which a host may implement
// or wrap on its own.
func ExampleStore() {
	mem := session.NewMemory()
	bus := &countingPubSub{PubSub: mem}
	var store session.Store = struct {
		session.Sessions
		session.PubSub
		session.Records
		session.EventLog
	}{mem, bus, mem, mem}

	ctx := context.Background()
	sub, _ := store.Subscribe(ctx, "news")
	defer sub.Close()
	n, _ := store.Publish(ctx, "news", []byte("hello"))
	fmt.Println(n, string(<-sub.C()), bus.published)
	// Output: 1 hello 1
}
