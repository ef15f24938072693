package mcphandler

type plainIn struct {
	Text string  `json:"text"`
	N    int     `json:"n,omitempty"`
	F    float64 `json:"f,omitempty"`
	B    bool    `json:"b,omitempty"`
	P    *string `json:"p,omitempty"`
}

// flatSchemas are the schemas the differential tests compare on: derived
// from structs, open, and with the type lists JSON Schema allows.
var flatSchemas = []string{
	string(mustSchema[plainIn]("t", "input")),
	`{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":["number","null"]}},"required":["a"]}`,
	`{"type":"object","properties":{"a":{"type":"string"}},"additionalProperties":false}`,
	`{"type":"object"}`,
}
