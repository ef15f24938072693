//go:build linux

package redistest

import (
	"os/exec"
	"runtime"
	"sync"
	"syscall"
)

// spawner starts the servers of a test binary running under Main so that
// they die with it, even when it cannot clean up (a -test.timeout panic, a
// kill): each gets SIGKILL when its parent dies (PR_SET_PDEATHSIG). Linux
// sends that signal when the thread that started the child exits, so all
// are started by one goroutine locked to its thread, which Main ends
// after the tests.
var spawner struct {
	mu   sync.Mutex // guards reqs
	reqs chan spawnReq
	done chan struct{}
}

type spawnReq struct {
	cmd *exec.Cmd
	err chan error
}

// startProcess starts cmd: through the spawner while the tests run under
// Main, directly otherwise.
func startProcess(cmd *exec.Cmd) error {
	if !shared.main.Load() {
		return cmd.Start()
	}
	spawner.mu.Lock()
	if spawner.reqs == nil {
		spawner.reqs, spawner.done = make(chan spawnReq), make(chan struct{})
		go func() {
			defer close(spawner.done)
			// Never unlocked: the thread ends with the goroutine, once
			// every server is stopped.
			runtime.LockOSThread()
			for r := range spawner.reqs {
				r.err <- r.cmd.Start()
			}
		}()
	}
	reqs := spawner.reqs
	spawner.mu.Unlock()
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	r := spawnReq{cmd: cmd, err: make(chan error, 1)}
	reqs <- r
	return <-r.err
}

// stopSpawner ends the spawner's goroutine and thread; servers still
// running, if any, get SIGKILL.
func stopSpawner() {
	spawner.mu.Lock()
	defer spawner.mu.Unlock()
	if spawner.reqs != nil {
		close(spawner.reqs)
		<-spawner.done
		spawner.reqs = nil
	}
}
