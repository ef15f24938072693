package upstream_test

import (
	"testing"

	"go.uber.org/goleak"
)

// mainWithLeakCheck runs the tests and fails if any goroutine outlives
// them: an operation must end everything it started.
func mainWithLeakCheck(m *testing.M) { goleak.VerifyTestMain(m) }
