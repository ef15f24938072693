package mcphandler_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/mcphandler/mcphandler"
)

// BenchmarkWorstInputs posts 2026-07-28 and 2025 tools/call requests whose
// arguments are the attacker's shapes, about 1 MiB each, and reports the
// server's time per MiB of body.
func BenchmarkWorstInputs(b *testing.B) {
	const size = 1 << 20
	shapes := map[string]string{
		"huge-exponent": `{"n":1e` + strings.Repeat("9", size) + `}`,
		"huge-mantissa": `{"n":` + strings.Repeat("7", size) + `}`,
		"many-numbers":  `{"n":[` + strings.TrimSuffix(strings.Repeat("1.5e3,", size/6), ",") + `]}`,
		"deep-nesting":  `{"n":` + strings.Repeat(`{"a":[`, 120) + strings.Repeat("1,", size/2-1000) + "1" + strings.Repeat(`]}`, 120) + `}`,
		"wide-object":   wide(size),
	}
	tool := mcphandler.Tool{Name: "t", Handler: func(context.Context, *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
		return mcphandler.TextResult("ok"), nil
	}}
	h := mcphandler.New(mcphandler.Config{
		Authenticate: mcphandler.InsecureAnonymous,
		ListTools:    func(context.Context) ([]mcphandler.Tool, error) { return []mcphandler.Tool{tool}, nil },
		Limits:       mcphandler.Limits{MaxBodyBytes: 8 << 20},
	})
	for _, name := range []string{"huge-exponent", "huge-mantissa", "many-numbers", "deep-nesting", "wide-object"} {
		args := shapes[name]
		body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":` + args +
			`,"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`
		b.Run("2026/"+name, func(b *testing.B) {
			for b.Loop() {
				req := httptest.NewRequest("POST", "/", strings.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Accept", "application/json, text/event-stream")
				req.Header.Set("MCP-Protocol-Version", "2026-07-28")
				req.Header.Set("Mcp-Method", "tools/call")
				req.Header.Set("Mcp-Name", "t")
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				if rec.Code != http.StatusOK && rec.Code != http.StatusBadRequest {
					b.Fatalf("status %d %s", rec.Code, rec.Body.String()[:100])
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(body))*(1<<20)/1e6, "ms/MiB")
		})
	}
}

func wide(size int) string {
	var sb strings.Builder
	sb.WriteString(`{"n":{`)
	for i := 0; sb.Len() < size; i++ {
		if i > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString(`"k` + strconv.Itoa(i) + `":1`)
	}
	sb.WriteString(`}}`)
	return sb.String()
}
