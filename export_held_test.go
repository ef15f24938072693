package mcphandler

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
