//go:build race

package jsonrpc

// raceEnabled: the race detector's instrumentation allocates, so
// allocation counts hold only without it (.ci/run counts them in a run
// without -race).
const raceEnabled = true
