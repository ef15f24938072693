package mcphandler

import "time"

// SetConfirmTimes shortens the periods of h's confirm machinery (the
// lease of the replica responsible for a confirm, how often records are
// re-read, how long an asker retries a store it cannot reach), so that
// tests of deaths and timeouts run in milliseconds. Call it before h
// serves any request.
func SetConfirmTimes(h *Handler, lease, poll time.Duration) {
	h.confirms.ct = confirmTimes{lease: lease, poll: poll, skew: poll, linger: h.confirms.ct.linger}
	h.confirms.setKinds()
}

// SetConfirmLinger shortens how long a confirm's record outlives its
// ConfirmTimeout (a minute), so that tests can pass a record's end of
// life. Call it before h serves any request.
func SetConfirmLinger(h *Handler, linger time.Duration) {
	h.confirms.ct.linger = linger
	h.confirms.setKinds()
}

// SkillDigestCacheSize is the bound of the skill digest cache.
const SkillDigestCacheSize = skillDigestCacheSize

// SkillDigestCacheLen is how many digests h's skill digest cache holds.
func SkillDigestCacheLen(h *Handler) int {
	h.catalog.skillDigests.mu.Lock()
	defer h.catalog.skillDigests.mu.Unlock()
	return len(h.catalog.skillDigests.m)
}

// RaceEnabled: allocation counts hold only without the race detector.
const RaceEnabled = raceEnabled

// BadToolLogSize bounds the bad tool definitions a Handler logs.
const BadToolLogSize = badDefLogSize

// BadToolLogLen is how many bad tool definitions h remembers as logged.
func BadToolLogLen(h *Handler) int {
	h.catalog.badDefs.mu.Lock()
	defer h.catalog.badDefs.mu.Unlock()
	return len(h.catalog.badDefs.seen)
}

// SchemaCacheEntries and SchemaCacheBytes bound the schema cache.
const (
	SchemaCacheEntries = schemaCacheEntries
	SchemaCacheBytes   = schemaCacheBytes
)

// SchemaCacheLen is how many schemas h's schema cache holds, and their
// summed length.
func SchemaCacheLen(h *Handler) (n, bytes int) {
	h.catalog.schemas.mu.Lock()
	defer h.catalog.schemas.mu.Unlock()
	return len(h.catalog.schemas.m), h.catalog.schemas.bytes
}

// HeldStreams is how many long-lived streams h holds on this replica (each
// registered for the published changes), and how many requests it runs
// that a client's hang-up does not end.
func HeldStreams(h *Handler) (streams, running int) {
	h.streams.changes.mu.Lock()
	streams = h.streams.changes.n
	h.streams.changes.mu.Unlock()
	h.bus.runMu.Lock()
	defer h.bus.runMu.Unlock()
	return streams, len(h.bus.running)
}

// MatchTemplate is matchTemplate, which resources/read uses to fill
// ResourceRequest.Params.
var MatchTemplate = matchTemplate
