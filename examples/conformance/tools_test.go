package main

import (
	"testing"

	"github.com/mcphandler/mcphandler"
)

// Every fixture tool is one the handler serves: a definition it could not
// serve would be left out, and the conformance suite would miss it.
func TestFixtureToolsAreServed(t *testing.T) {
	if err := mcphandler.CheckTools(mcphandler.Config{}, fixtureTools(&notifier{})); err != nil {
		t.Fatal(err)
	}
}
