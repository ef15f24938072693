package redisstore

import (
	"context"
	"fmt"
	"log"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/mcphandler/mcphandler/session/redisstore/redistest"
)

// TestMain checks that no test leaves a goroutine behind: every Store is
// closed by its test, and Close must stop the dispatcher.
func TestMain(m *testing.M) {
	redis.SetLogger(quietLogger{})
	goleak.VerifyTestMain(redistest.Main(m))
}

// quietLogger drops the dial failures go-redis logs several times a second
// while the failure tests keep Redis down, and the failover client's
// notices of the master it found, and prints the rest.
type quietLogger struct{}

func (quietLogger) Printf(_ context.Context, format string, v ...any) {
	s := fmt.Sprintf(format, v...)
	for _, quiet := range []string{"failed to dial", "sentinel: selected addr", "sentinel: new master"} {
		if strings.Contains(s, quiet) {
			return
		}
	}
	log.Print("redis: ", s)
}
