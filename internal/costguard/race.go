//go:build race

package costguard

const raceEnabled = true
