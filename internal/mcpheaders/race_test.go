//go:build race

package mcpheaders

// raceEnabled: the race detector's instrumentation allocates, so
// allocation counts hold only without it.
const raceEnabled = true
