//go:build !race

package costguard

const raceEnabled = false
