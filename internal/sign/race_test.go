//go:build race

package sign

// raceEnabled: the race detector allocates.
const raceEnabled = true
