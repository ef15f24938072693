//go:build !unix

package otelmcp

import "time"

// processCPU cannot read the process's CPU time here: runCost uses the
// wall time alone.
func processCPU() (time.Duration, bool) { return 0, false }
