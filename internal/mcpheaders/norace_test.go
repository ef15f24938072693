//go:build !race

package mcpheaders

const raceEnabled = false
