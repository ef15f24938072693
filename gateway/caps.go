package gateway

import (
	"encoding/json"

	"github.com/mcphandler/mcphandler/session"
)

// capsJSON is the capabilities object an upstream is told the client has:
// exactly the questions the client declared it can answer (elicitation
// and its modes, sampling, roots), never more, and nothing of this
// server's own extensions.
func capsJSON(c session.Capabilities) json.RawMessage {
	b := []byte{'{'}
	add := func(member string) {
		if len(b) > 1 {
			b = append(b, ',')
		}
		b = append(b, member...)
	}
	switch form, url := c.Has(session.CapElicitationForm), c.Has(session.CapElicitationURL); {
	case form && url:
		add(`"elicitation":{"form":{},"url":{}}`)
	case form:
		add(`"elicitation":{"form":{}}`)
	case url:
		add(`"elicitation":{"url":{}}`)
	}
	switch {
	case c.Has(session.CapSamplingTools):
		add(`"sampling":{"tools":{}}`)
	case c.Has(session.CapSampling):
		add(`"sampling":{}`)
	}
	switch {
	case c.Has(session.CapRootsListChanged):
		add(`"roots":{"listChanged":true}`)
	case c.Has(session.CapRoots):
		add(`"roots":{}`)
	}
	return append(b, '}')
}
