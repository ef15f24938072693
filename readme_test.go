package mcphandler_test

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestReadmeFirstContact: what a new user needs before the first line of
// code is in the README, and stays true: the two commands first (the demo
// and the tests, which .ci/run runs), the Go version go.mod asks for, the
// go get line, what the tests need (Redis), and the Node version the
// Inspector command needs.
func TestReadmeFirstContact(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	mod, err := os.ReadFile("go.mod")
	if err != nil {
		t.Fatal(err)
	}
	ci, err := os.ReadFile(".ci/run")
	if err != nil {
		t.Fatal(err)
	}
	text := string(readme)
	first := strings.SplitN(text, "\n", 8)
	if len(first) < 8 || !strings.HasPrefix(first[3], "go run ./examples/quickstart") || !strings.HasPrefix(first[4], "go test ./...") {
		t.Errorf("the README's first lines are not the demo and the test command:\n%s", strings.Join(first[:min(len(first), 7)], "\n"))
	}
	if !strings.Contains(string(ci), "go test -race -count=1 ./...") {
		t.Error(".ci/run does not run the README's test command (with -race)")
	}
	goVersion := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindStringSubmatch(string(mod))
	if goVersion == nil || !strings.Contains(text, "Go "+goVersion[1]+" or later") {
		t.Errorf("the README does not name the Go version go.mod asks for (%v)", goVersion)
	}
	for _, want := range []string{
		"go get github.com/mcphandler/mcphandler",
		"REDIS_URL",
		"127.0.0.1:6379",
		"Node 22",
		"npx @modelcontextprotocol/inspector --cli",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the README does not say %q", want)
		}
	}
}
