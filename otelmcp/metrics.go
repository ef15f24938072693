package otelmcp

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcphandler/mcphandler"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/semconv/v1.41.0/mcpconv"
)

type metricProvider = metric.MeterProvider

// WithMeterProvider sets the MeterProvider. If unset, the global one
// (otel.GetMeterProvider) is used.
func WithMeterProvider(mp metric.MeterProvider) Option { return func(c *config) { c.mp = mp } }

// DurationBuckets are the explicit bucket boundaries (seconds) the MCP
// conventions give both duration histograms.
var DurationBuckets = []float64{0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60, 120, 300}

// maxSessions bounds the sessions remembered for
// mcp.server.session.duration and mcphandler.server.sessions; past it,
// new sessions are not tracked (and not counted) until old ones end or go
// idle.
const maxSessions = 100_000

type metrics struct {
	op       mcpconv.ServerOperationDuration
	sess     mcpconv.ServerSessionDuration
	confirms metric.Int64Counter
	streams  metric.Int64UpDownCounter

	sets cache[opKey, []metric.RecordOption] // the attributes of each key, ready

	// The 2025 sessions this replica created: session id ->
	// *sessionSeen, at most maxSessions of them (nsessions). Requests only
	// read the map and store the time they were seen; a sweep, at most
	// once a second, forgets sessions idle for ttl.
	ttl       time.Duration
	sessions  sync.Map
	nsessions atomic.Int64
	sweepMu   sync.Mutex
	swept     atomic.Int64 // when the last sweep began, in Unix nanoseconds
}

type sessionSeen struct {
	start   time.Time
	version string
	last    atomic.Int64 // its latest request, in Unix nanoseconds
}

func newMetrics(mp metric.MeterProvider, ttl time.Duration) (*metrics, error) {
	meter := mp.Meter(ScopeName)
	m := &metrics{ttl: ttl, sets: cache[opKey, []metric.RecordOption]{limit: maxAttrSets}}
	var err error
	buckets := metric.WithExplicitBucketBoundaries(DurationBuckets...)
	if m.op, err = mcpconv.NewServerOperationDuration(meter, buckets); err != nil {
		return nil, err
	}
	if m.sess, err = mcpconv.NewServerSessionDuration(meter, buckets); err != nil {
		return nil, err
	}
	if m.confirms, err = meter.Int64Counter("mcphandler.server.confirms", metric.WithUnit("{confirm}"),
		metric.WithDescription("Confirms decided, by mcphandler.outcome.")); err != nil {
		return nil, err
	}
	if m.streams, err = meter.Int64UpDownCounter("mcphandler.server.streams", metric.WithUnit("{stream}"),
		metric.WithDescription("Open long-lived streams (GET streams, subscriptions/listen) on this replica.")); err != nil {
		return nil, err
	}
	_, err = meter.Int64ObservableUpDownCounter("mcphandler.server.sessions", metric.WithUnit("{session}"),
		metric.WithDescription("2025 sessions created on this replica, not ended and not idle for the session TTL."),
		metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
			o.Observe(int64(m.openSessions(time.Now())))
			return nil
		}))
	if err != nil {
		return nil, err
	}
	return m, nil
}

// operation records one MCP request: its duration, and a confirm it
// decided.
func (m *metrics) operation(ctx context.Context, req *mcphandler.Request, res mcphandler.Result, errType string, end time.Time) {
	m.op.Inst().Record(ctx, end.Sub(req.Start).Seconds(), m.opAttrs(req, res, errType)...)
	if res.ConfirmID != "" && decided(res.Outcome) {
		m.confirms.Add(ctx, 1, metric.WithAttributes(OutcomeKey.String(string(res.Outcome))))
	}
	if req.SessionID != "" {
		m.seen(req.SessionID, req.ProtocolVersion, req.Method == "initialize" && res.ErrorCode == 0, end)
	}
}

// opKey is what the attributes of a duration depend on.
type opKey struct{ method, name, version, errType string }

// maxAttrSets bounds the attribute sets kept for reuse; past it, sets are
// made per request.
const maxAttrSets = 4096

// opAttrs returns the attributes of a request's duration: only values of
// bounded cardinality, whatever clients send. The method is one the
// handler serves, or mcphandler.Other (the handler never gives a client's
// own method); the version one it serves, else "_OTHER"; a tool or prompt
// name is left out unless the handler found it among the caller's
// (Result.Found): a name the client merely sent never becomes a series.
func (m *metrics) opAttrs(req *mcphandler.Request, res mcphandler.Result, errType string) []metric.RecordOption {
	k := opKey{method: req.Method, version: servedVersion(req.ProtocolVersion), errType: errType}
	if (req.Method == "tools/call" || req.Method == "prompts/get") && res.Found {
		k.name = req.Target
	}
	if set, ok := m.sets.load(k); ok {
		return set
	}
	a := make([]attribute.KeyValue, 0, 5)
	a = append(a, semconv.McpMethodNameKey.String(k.method))
	switch {
	case req.Method == "tools/call":
		a = append(a, semconv.GenAIOperationNameExecuteTool)
		if k.name != "" {
			a = append(a, semconv.GenAIToolName(k.name))
		}
	case k.name != "":
		a = append(a, semconv.GenAIPromptName(k.name))
	}
	if k.version != "" {
		a = append(a, semconv.McpProtocolVersion(k.version))
	}
	if errType != "" {
		a = append(a, semconv.ErrorTypeKey.String(errType))
	}
	set := []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(a...))}
	m.sets.store(k, set)
	return set
}

// servedVersion is v if it is a protocol revision the handler serves (or
// empty), else "_OTHER": a metric attribute takes no other value.
func servedVersion(v string) string {
	switch v {
	case "", mcphandler.Version20241105, mcphandler.Version20250326, mcphandler.Version20250618,
		mcphandler.Version20251125, mcphandler.Version20260728:
		return v
	}
	return mcphandler.Other
}

// decided reports whether a tools/call outcome ends its confirm here:
// not while the 2026-07-28 client is being asked, not when another
// replica finishes it.
func decided(o mcphandler.Outcome) bool {
	switch o {
	case "", mcphandler.OutcomeInputRequired, "handed_over":
		return false
	}
	return true
}

// seen notes a request of session sid at now (created: by an initialize
// here). It takes no lock: requests of many sessions run it at once.
func (m *metrics) seen(sid, version string, created bool, now time.Time) {
	at := now.UnixNano()
	if v, ok := m.sessions.Load(sid); ok {
		v.(*sessionSeen).last.Store(at)
	} else if created {
		if m.nsessions.Add(1) > maxSessions {
			m.nsessions.Add(-1)
		} else {
			s := &sessionSeen{start: now, version: version}
			s.last.Store(at)
			if _, loaded := m.sessions.LoadOrStore(sid, s); loaded {
				m.nsessions.Add(-1)
			}
		}
	}
	if at-m.swept.Load() >= int64(time.Second) {
		m.sweep(now, false)
	}
}

// sweep forgets the sessions idle for the TTL at now. Unless wait, it
// returns at once while another sweep runs.
func (m *metrics) sweep(now time.Time, wait bool) {
	if wait {
		m.sweepMu.Lock()
	} else if !m.sweepMu.TryLock() {
		return
	}
	defer m.sweepMu.Unlock()
	m.swept.Store(now.UnixNano())
	idle := now.Add(-m.ttl).UnixNano()
	m.sessions.Range(func(k, v any) bool {
		if v.(*sessionSeen).last.Load() < idle && m.sessions.CompareAndDelete(k, v) {
			m.nsessions.Add(-1)
		}
		return true
	})
}

func (m *metrics) openSessions(now time.Time) int {
	m.sweep(now, true)
	return int(m.nsessions.Load())
}

// sessionEnded records the duration of session sid, ended by DELETE: from
// created, the creation time its record holds, on any replica; else from
// its initialize, if that was served here. The version is the negotiated
// one (the DELETE's header, which the handler checked against the
// session, when this replica did not see the initialize).
func (m *metrics) sessionEnded(ctx context.Context, sid, version string, created time.Time) {
	v, ok := m.sessions.LoadAndDelete(sid)
	if ok {
		m.nsessions.Add(-1)
		s := v.(*sessionSeen)
		if created.IsZero() {
			created = s.start
		}
		if s.version != "" {
			version = s.version
		}
	}
	if created.IsZero() {
		return
	}
	d := max(time.Since(created), 0).Seconds()
	if version = servedVersion(version); version == "" {
		m.sess.Record(ctx, d)
		return
	}
	m.sess.Record(ctx, d, semconv.McpProtocolVersion(version))
}

// streamOpened counts an open stream of kind until the returned func is
// called.
func (m *metrics) streamOpened(ctx context.Context, kind string) func() {
	attrs := metric.WithAttributes(StreamKey.String(kind))
	m.streams.Add(ctx, 1, attrs)
	return func() { m.streams.Add(context.WithoutCancel(ctx), -1, attrs) }
}
