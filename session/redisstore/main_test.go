package redisstore

import (
	"context"
	"fmt"
	"log"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
)

// TestMain checks that no test leaves a goroutine behind: every Store is
// closed by its test, and Close must stop the dispatcher.
func TestMain(m *testing.M) {
	redis.SetLogger(quietLogger{})
	goleak.VerifyTestMain(m)
}

// quietLogger drops the dial failures go-redis logs several times a second
// while the failure tests keep Redis down, and prints the rest.
type quietLogger struct{}

func (quietLogger) Printf(_ context.Context, format string, v ...any) {
	if s := fmt.Sprintf(format, v...); !strings.Contains(s, "failed to dial") {
		log.Print("redis: ", s)
	}
}
