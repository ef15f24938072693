//go:build race

package canon

// raceEnabled: the race detector makes sync.Pool drop items at random.
const raceEnabled = true
