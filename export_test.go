package mcphandler

import "time"

// SetConfirmTimes shortens the periods of h's confirm machinery (the
// lease of the replica responsible for a confirm, how often records are
// re-read, how long an asker retries a store it cannot reach), so that
// tests of deaths and timeouts run in milliseconds. Call it before h
// serves any request.
func SetConfirmTimes(h *Handler, lease, poll time.Duration) {
	h.ct = confirmTimes{lease: lease, poll: poll, skew: poll, linger: h.ct.linger}
}

// SetConfirmLinger shortens how long a confirm's record outlives its
// ConfirmTimeout (a minute), so that tests can pass a record's end of
// life. Call it before h serves any request.
func SetConfirmLinger(h *Handler, linger time.Duration) {
	h.ct.linger = linger
}

// SkillDigestCacheSize is the bound of the skill digest cache.
const SkillDigestCacheSize = skillDigestCacheSize

// SkillDigestCacheLen is how many digests h's skill digest cache holds.
func SkillDigestCacheLen(h *Handler) int {
	h.skillDigests.mu.Lock()
	defer h.skillDigests.mu.Unlock()
	return len(h.skillDigests.m)
}

// RaceEnabled: allocation counts hold only without the race detector.
const RaceEnabled = raceEnabled
