package otelmcp

import (
	"encoding/json"
	"maps"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/propagation"
)

// decodeCarrier is metaCarrier by encoding/json, for any _meta, as it was
// before it walked the members.
func decodeCarrier(meta json.RawMessage) propagation.MapCarrier {
	var m map[string]json.RawMessage
	if json.Unmarshal(meta, &m) != nil {
		return nil
	}
	c := propagation.MapCarrier{}
	for _, k := range []string{"traceparent", "tracestate", "baggage"} {
		var s string
		if v, ok := m[k]; ok && json.Unmarshal(v, &s) == nil {
			c[k] = s
		}
	}
	if len(c) == 0 {
		return nil
	}
	return c
}

// FuzzMetaCarrier holds metaCarrier, which skips decoding a _meta that
// cannot name traceparent, tracestate or baggage, to what decoding it
// every time gives: never a carrier more, never one less, the same values.
func FuzzMetaCarrier(f *testing.F) {
	for _, s := range []string{
		`{"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01","tracestate":"a=1","baggage":"u=a"}`,
		`{"trace\u0070arent":"x"}`, `{"TraceParent":"x"}`, `{"baggage":null}`, `{"baggage":1}`, `{"tracestate":"a","tracestate":"b"}`,
		`{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`,
		`{"x":"traceparent"}`, `{"x":{"traceparent":"y"}}`, `[]`, `null`, `{`, `{"a":"\u00e9"}`, ``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, meta []byte) {
		var got propagation.MapCarrier
		checkLinear(t, len(meta), func() { got = metaCarrier(meta) })
		want := decodeCarrier(meta)
		if (got == nil) != (want == nil) || !maps.Equal(got, want) {
			t.Fatalf("metaCarrier(%q) = %v, decoded every time %v", meta, got, want)
		}
	})
}

// TestMetaCarrierSkipsOnlyWhatCannotCarry: a _meta without any of the
// names is not decoded, and one that spells a name with an escape is.
func TestMetaCarrierSkipsOnlyWhatCannotCarry(t *testing.T) {
	if mayCarry([]byte(`{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"c","version":"1"}}`)) {
		t.Error("a 2026-07-28 _meta without a trace context is decoded")
	}
	if c := metaCarrier([]byte(`{"trace\u0070arent":"tp","b\u0061ggage":"u=a"}`)); c["traceparent"] != "tp" || c["baggage"] != "u=a" {
		t.Errorf("escaped names: carrier %v, want traceparent and baggage", c)
	}
}

// TestMetaCarrierCost: a _meta an attacker shapes worst — a MiB of
// members naming traceparent, of nesting, of escapes — costs time linear
// in its size.
func TestMetaCarrierCost(t *testing.T) {
	const n = 1 << 20
	for _, m := range []string{
		`{` + strings.Repeat(`"traceparent":"x",`, n/18) + `"baggage":"b"}`,
		`{"traceparent":"x","a":` + strings.Repeat(`[`, n/2) + strings.Repeat(`]`, n/2) + `}`,
		`{"tracestate":"` + strings.Repeat(`\u0061`, n/6) + `"}`,
	} {
		checkLinear(t, len(m), func() { metaCarrier([]byte(m)) })
	}
}
