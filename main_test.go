package mcphandler_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/mcphandler/mcphandler/session/redisstore/redistest"
)

func TestMain(m *testing.M) {
	// go-redis retries a refused dial from a goroutine of its own that
	// sleeps a second before it notices its pool was closed; it is not ours.
	goleak.VerifyTestMain(redistest.Main(m), goleak.IgnoreAnyFunction("github.com/redis/go-redis/v9/internal/pool.(*ConnPool).tryDial"))
}
