//go:build !race

package mcphandler

const raceEnabled = false
