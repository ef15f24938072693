//go:build !unix

package costguard

import "time"

// processCPU cannot read the process's CPU time here: measure uses the
// wall time alone.
func processCPU() (time.Duration, bool) { return 0, false }
