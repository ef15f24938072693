package mcphandler

import (
	"strconv"
	"testing"
)

// duplicateNames finds every shared name, and only those, in lists short
// (compared pairwise) and long (through the hash set), wherever the two
// tools sit.
func TestDuplicateNames(t *testing.T) {
	for _, n := range []int{2, 16, 17, 1000} {
		tools := make([]Tool, n)
		for i := range tools {
			tools[i].Name = "t" + strconv.Itoa(i)
		}
		if d := duplicateNames(tools); d != nil {
			t.Fatalf("%d distinct names: %v", n, d)
		}
		for _, at := range [][2]int{{0, n - 1}, {n / 2, n/2 - 1}, {n - 2, n - 1}} {
			if at[0] == at[1] {
				continue
			}
			list := append([]Tool(nil), tools...)
			list[at[1]].Name = list[at[0]].Name
			d := duplicateNames(list)
			if len(d) != 1 || d[list[at[0]].Name] != 2 {
				t.Fatalf("%d names, %d and %d the same: %v", n, at[0], at[1], d)
			}
		}
	}
}
