//go:build !unix

package redistest

import "errors"

func (s *server) freeze() error { return errors.New("cannot stop a process on this system") }
func (s *server) thaw() error   { return nil }
