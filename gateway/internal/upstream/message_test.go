package upstream

import (
	"bytes"
	"strings"
	"testing"

	"github.com/mcphandler/mcphandler/internal/jsonrpc"
)

// memberValue, keyIs and keyHasPrefix read keys as members does
// (jsonrpc.String, exactly): escaped, non-ASCII and differently cased
// spellings included.
func TestKeysReadAsMembers(t *testing.T) {
	obj := []byte(`{"resultType":"a","result\u0054ype2":"b","RESULTTYPE":"c","é":"d","io.modelcontextprotocol\/x":1,"io.modelcontextprotocolX":2}`)
	all := members(obj)
	for _, key := range []string{"resultType", "resultType2", "resultTYPE", "RESULTTYPE", "é", "io.modelcontextprotocol/x", "missing"} {
		if got, want := memberValue(obj, key), all[key]; !bytes.Equal(got, want) {
			t.Errorf("memberValue(%q) = %s, want %s", key, got, want)
		}
	}
	jsonrpc.Members(obj, func(k, _ []byte) bool {
		s, _ := jsonrpc.String(k)
		for _, name := range []string{"resultType", "resultType2", "RESULTTYPE", "é", reservedMeta + "x"} {
			if keyIs(k, name) != (s == name) {
				t.Errorf("keyIs(%s, %q) = %v", k, name, !(s == name))
			}
		}
		if keyHasPrefix(k, reservedMeta) != strings.HasPrefix(s, reservedMeta) {
			t.Errorf("keyHasPrefix(%s) = %v", k, !strings.HasPrefix(s, reservedMeta))
		}
		return true
	})
}
