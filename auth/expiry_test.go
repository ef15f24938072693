package auth

import (
	"context"
	"testing"
	"time"

	"github.com/mcphandler/mcphandler"
)

// An identity carries its token's expiry, so that the handler can end the
// caller's long-lived streams then: from a JWT's "exp" and from an
// introspection answer's "exp", and never later than a custom mapper says.
func TestIdentityExpires(t *testing.T) {
	p := newFakeProvider(t)
	exp := time.Now().Add(10 * time.Minute).Truncate(time.Second)

	o := newTestOIDC(t, p, nil)
	c := p.claims(testAudience, "alice", "acme")
	c["exp"] = exp.Unix()
	id, err := o.Authenticate(bearerRequest("Bearer " + sign(t, p.key(), c)))
	if err != nil || !id.Expires.Equal(exp) {
		t.Fatalf("OIDC: Expires %v, %v; want the token's exp %v", id.Expires, err, exp)
	}

	// A mapper may shorten the lifetime, never extend it.
	sooner := exp.Add(-5 * time.Minute)
	for set, want := range map[time.Time]time.Time{sooner: sooner, exp.Add(time.Hour): exp} {
		o := newTestOIDC(t, p, func(cfg *OIDCConfig) {
			cfg.Claims = func(ctx context.Context, c Claims) (mcphandler.Identity, error) {
				id, err := DefaultClaims("")(ctx, c)
				id.Expires = set
				return id, err
			}
		})
		id, err := o.Authenticate(bearerRequest("Bearer " + sign(t, p.key(), c)))
		if err != nil || !id.Expires.Equal(want) {
			t.Fatalf("mapper set %v: Expires %v, %v; want %v", set, id.Expires, err, want)
		}
	}

	in := newTestIntrospection(t, p, nil)
	p.setIntrospection("opaque-alice", activeAnswer(p, "alice", "acme", exp))
	for range 2 { // the second answer comes from the cache
		id, err := in.Authenticate(bearerRequest("Bearer opaque-alice"))
		if err != nil || !id.Expires.Equal(exp) {
			t.Fatalf("introspection: Expires %v, %v; want the answer's exp %v", id.Expires, err, exp)
		}
	}
}
