package realop_test

import (
	"log/slog"
	"os"
	"testing"
)

// TestMain keeps the warnings and errors of the provider's log: exampleop
// logs every request it serves at Info, through slog's default logger.
func TestMain(m *testing.M) {
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	os.Exit(m.Run())
}
