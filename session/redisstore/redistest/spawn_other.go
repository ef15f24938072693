//go:build !linux

package redistest

import "os/exec"

func startProcess(cmd *exec.Cmd) error { return cmd.Start() }

func stopSpawner() {}
