package ratelimit

import "testing"

func testLimit(t *testing.T, in Limit) *limit {
	t.Helper()
	lim, err := newLimit(in)
	if err != nil {
		t.Fatal(err)
	}
	return &lim
}
