package ratelimit_test

import (
	"context"
	"fmt"
	"log"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	redis.SetLogger(quietLogger{})
	// go-redis retries a refused dial from a goroutine of its own that
	// sleeps a second before it notices its pool was closed; it is not ours.
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/redis/go-redis/v9/internal/pool.(*ConnPool).tryDial"))
}

// quietLogger drops the dial failures go-redis logs while the fault tests
// keep Redis down, and prints the rest.
type quietLogger struct{}

func (quietLogger) Printf(_ context.Context, format string, v ...any) {
	if s := fmt.Sprintf(format, v...); !strings.Contains(s, "failed to dial") {
		log.Print("redis: ", s)
	}
}
