package gateway

import "time"

// SetClock makes g read the time from now: the breakers, the grace
// period and the list cache.
func SetClock(g *Gateway, now func() time.Time) { g.now = now }

// Breakers is how many upstreams' failures g remembers.
func Breakers(g *Gateway) int { return g.breakers.len() }

// CachedLists is how many lists g keeps.
func CachedLists(g *Gateway) int {
	g.lists.mu.Lock()
	defer g.lists.mu.Unlock()
	return len(g.lists.m)
}

// SetExchangeClock makes s read the time from now: when its tokens
// expire.
func SetExchangeClock(s *TokenExchange, now func() time.Time) { s.now = now }

// ExchangeTokens is how many tokens s keeps.
func ExchangeTokens(s *TokenExchange) int { return s.len() }
