package auth

import (
	"crypto/sha256"
	"crypto/subtle"
	"maps"
	"net/http"
	"slices"

	"github.com/mcphandler/mcphandler"
)

// APIKeys authenticates static API keys, typically of service accounts,
// presented as bearer tokens ("Authorization: Bearer <key>"). Its
// Authenticate method is a [mcphandler.AuthenticateFunc].
//
// Only the SHA-256 of each key is kept. A presented key is hashed and
// compared with every stored hash in constant time ([crypto/subtle]), so
// neither the comparison nor the position of a match leaks through timing.
// Keys should be long random strings (32 bytes or more, e.g. base64url);
// rotate a key by configuring the old and the new one for a while.
//
// An APIKeys is immutable and safe for concurrent use.
type APIKeys struct {
	entries []apiKey
}

type apiKey struct {
	hash [sha256.Size]byte
	id   mcphandler.Identity
}

// NewAPIKeys returns an authenticator for the given keys, each mapped to
// the identity its holder gets. Empty keys are ignored. The map and the
// identities are copied; the caller may discard or change them afterwards.
func NewAPIKeys(keys map[string]mcphandler.Identity) *APIKeys {
	a := &APIKeys{entries: make([]apiKey, 0, len(keys))}
	for k, id := range keys {
		if k == "" {
			continue
		}
		id.Scopes = slices.Clone(id.Scopes)
		id.Attributes = maps.Clone(id.Attributes)
		a.entries = append(a.entries, apiKey{hash: sha256.Sum256([]byte(k)), id: id})
	}
	return a
}

// Authenticate returns the identity of the API key presented as r's bearer
// token. It returns [ErrNoToken] without a token and a [*TokenError]
// "unrecognized" for a key that is not configured. The identity's Scopes
// and Attributes are fresh copies.
func (a *APIKeys) Authenticate(r *http.Request) (mcphandler.Identity, error) {
	tok, err := BearerToken(r)
	if err != nil {
		return mcphandler.Identity{}, err
	}
	sum := sha256.Sum256([]byte(tok))
	found := -1
	for i := range a.entries {
		eq := subtle.ConstantTimeCompare(sum[:], a.entries[i].hash[:])
		found = subtle.ConstantTimeSelect(eq, i, found)
	}
	if found < 0 {
		return mcphandler.Identity{}, invalid("unrecognized")
	}
	id := a.entries[found].id
	id.Scopes = slices.Clone(id.Scopes)
	id.Attributes = maps.Clone(id.Attributes)
	return id, nil
}
