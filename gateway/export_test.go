package gateway

import (
	"encoding/json"
	"time"

	"github.com/mcphandler/mcphandler"
)

// SetClock makes g read the time from now: the breakers, the grace
// period and the list cache.
func SetClock(g *Gateway, now func() time.Time) { g.now = now }

// Breakers is how many upstreams' failures g remembers.
func Breakers(g *Gateway) int { return g.breakers.len() }

// CachedLists is how many lists g keeps.
func CachedLists(g *Gateway) int {
	n := 0
	for _, c := range []*listCache{g.lists.l1, g.callers} {
		c.mu.Lock()
		n += len(c.m)
		c.mu.Unlock()
	}
	return n
}

// SetExchangeClock makes s read the time from now: when its tokens
// expire.
func SetExchangeClock(s *TokenExchange, now func() time.Time) { s.now = now }

// ExchangeTokens is how many tokens s keeps.
func ExchangeTokens(s *TokenExchange) int { return s.len() }

// SetWatchTimes makes g's watches hold their lease for lease and end idle
// after a list of their scope; for tests that cannot wait minutes.
func SetWatchTimes(g *Gateway, lease, idle time.Duration) {
	g.watches.mu.Lock()
	g.watches.lease, g.watches.idle = lease, idle
	g.watches.mu.Unlock()
}

// InflightURLs is how many upstream URLs g holds slots of.
func InflightURLs(g *Gateway) int { return g.inflight.len() }

// ParseTokens checks a token endpoint's answer as the gateway does, and
// returns the access token and its expiry (unix ms; 0: none).
func ParseTokens(body []byte, now time.Time) (string, string, int64, error) {
	var tr tokenResponse
	err := json.Unmarshal(body, &tr)
	gr, err := tokens(&tr, err, now)
	if err != nil {
		return "", "", 0, err
	}
	return gr.Access, gr.Refresh, gr.Expiry, nil
}

// OpenLink reports whether g takes l as an authorization link, and for
// whom.
func OpenLink(g *Gateway, l string) (tenant, subject, upstream string, ok bool) {
	c, ok := g.auths.openLink(l)
	return c.Tenant, c.Subject, c.Upstream, ok
}

// AuthLink is the authorization link g makes for id and upstream.
func AuthLink(g *Gateway, id mcphandler.Identity, upstream string) string {
	return g.auths.link(id, &Upstream{ID: upstream})
}
