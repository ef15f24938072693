package ratelimit

import (
	"crypto/sha256"
	"encoding/base64"
	"strconv"

	"github.com/mcphandler/mcphandler"
)

// maxRawID bounds a bucket id kept as it is; a longer one is hashed.
const maxRawID = 128

// bucketID returns the id of call's bucket of lim, using b (empty) as a
// buffer: the fields the limit is per, each as a letter, its length in
// bytes, ':' and its bytes —
//
//	n6:tenantt4:acme           the limit "tenant" of tenant "acme"
//	n2:idt4:acmes5:alice       the limit "id" of alice of acme
//	n1:xo6:search              the limit "x" of the tool "search"
//
// so that two different buckets never share an id, whatever bytes the
// names hold. An id longer than maxRawID, or with a byte outside
// printable ASCII or a brace (which would end a Redis Cluster hash tag),
// is "#" and the unpadded base64url of its SHA-256 instead (44 bytes);
// raw ids start with 'n', so the two forms never meet.
func bucketID(b []byte, lim *limit, call *mcphandler.ToolCall) string {
	b = appendField(b, 'n', lim.name)
	if lim.by&(ByTenant|BySubject) != 0 {
		b = appendField(b, 't', call.Identity.Tenant)
	}
	if lim.by&BySubject != 0 {
		b = appendField(b, 's', call.Identity.Subject)
	}
	if lim.by&ByTool != 0 {
		b = appendField(b, 'o', call.Tool.Name)
	}
	if len(b) <= maxRawID && plain(b) {
		return string(b)
	}
	sum := sha256.Sum256(b)
	var out [1 + 43]byte
	out[0] = '#'
	base64.RawURLEncoding.Encode(out[1:], sum[:])
	return string(out[:])
}

func appendField(b []byte, kind byte, v string) []byte {
	b = append(b, kind)
	b = strconv.AppendInt(b, int64(len(v)), 10)
	b = append(b, ':')
	return append(b, v...)
}

// plain reports whether b is printable ASCII without braces.
func plain(b []byte) bool {
	for _, c := range b {
		if c < 0x20 || c > 0x7e || c == '{' || c == '}' {
			return false
		}
	}
	return true
}
