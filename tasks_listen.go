package mcphandler

import (
	"encoding/json"
	"slices"
	"strconv"

	"github.com/mcphandler/mcphandler/internal/jsonrpc"
	"github.com/mcphandler/mcphandler/internal/task"
)

// notifications/tasks over subscriptions/listen (2026-07-28, the tasks
// extension): a listen filter may name taskIds; the server agrees to those
// that are the caller's own tasks (another identity's, or an unknown one,
// is left out of the acknowledgement, alike), and the stream then carries
// every change of them, from any replica, as notifications/tasks with the
// DetailedTask as params.

// agree bounds the taskIds of a listen filter (at most
// Config.Limits.MaxSubscriptions, each at most task.MaxTaskIDLen bytes) and
// returns those rq's caller owns. A request that did not declare the
// extension is agreed none.
func (t *tasks) agree(rq *request, ids []string) ([]string, *jsonrpc.Error) {
	if len(ids) > t.cfg.Limits.MaxSubscriptions {
		return nil, invalidParams("Invalid params: a listen filter names at most " + strconv.Itoa(t.cfg.Limits.MaxSubscriptions) + " taskIds")
	}
	for _, id := range ids {
		if id == "" || len(id) > task.MaxTaskIDLen {
			return nil, invalidParams("Invalid params: a taskId is 1 to " + strconv.Itoa(task.MaxTaskIDLen) + " bytes")
		}
	}
	if len(ids) == 0 || t.cfg.ListTools == nil || !rq.tasksDeclared() {
		return nil, nil
	}
	var agreed []string
	owner := ownerOf(rq.id)
	for _, id := range ids {
		if _, err := t.m.Get(rq.ctx, owner, id); err == nil && !slices.Contains(agreed, id) {
			agreed = append(agreed, id)
		}
	}
	return agreed, nil
}

// taskFeed is the notifications/tasks of one listen stream: c delivers
// them ready to send; stop ends the feed (c is never closed, so that the
// feed ending does not end the stream).
type taskFeed struct {
	c    chan []byte
	stop func()
}

// feed starts the feed of the tasks ids of rq's caller, tagged with
// the subscription id subID. With no ids, its channel is nil.
func (t *tasks) feed(rq *request, ids []string, subID json.RawMessage) (*taskFeed, error) {
	if len(ids) == 0 {
		return &taskFeed{stop: func() {}}, nil
	}
	l, err := t.m.Listen(rq.ctx, rq.id.Tenant)
	if err != nil {
		return nil, err
	}
	f := &taskFeed{c: make(chan []byte, 16)}
	done := make(chan struct{})
	f.stop = func() { close(done); l.Close() }
	owner := ownerOf(rq.id)
	go func() {
		for n := range l.C() {
			if !n.For(owner) || !slices.Contains(ids, n.Task.TaskID) {
				continue
			}
			b, err := json.Marshal(n.Task)
			if err != nil {
				continue
			}
			params := append([]byte(`{"_meta":{"`+metaSubscriptionID+`":`), subID...)
			params = append(append(params, "},"...), b[1:]...)
			select {
			case f.c <- jsonrpc.AppendRequest(nil, nil, task.NotificationTasks, params):
			case <-done:
				return
			default: // a slow stream misses it: tasks/get tells the truth
			}
		}
	}()
	return f, nil
}
