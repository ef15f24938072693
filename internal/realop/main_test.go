package realop_test

import (
	"log/slog"
	"os"
	"testing"
)

// TestMain keeps the warnings and errors of the provider's log: exampleop
// logs every request it serves at Info, through slog's default logger. It
// removes the commands the tests built.
func TestMain(m *testing.M) {
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	code := m.Run()
	removeBuilt()
	os.Exit(code)
}
