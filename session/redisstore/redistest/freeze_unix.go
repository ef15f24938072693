//go:build unix

package redistest

import "syscall"

// freeze stops the process (SIGSTOP), as a host that stalls would; thaw
// lets it go on (SIGCONT).
func (s *server) freeze() error { return s.signal(syscall.SIGSTOP) }
func (s *server) thaw() error   { return s.signal(syscall.SIGCONT) }
