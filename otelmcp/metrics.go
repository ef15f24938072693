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

	sets  sync.Map // opKey -> []metric.RecordOption: the attributes of each key, ready
	nsets atomic.Int64

	ttl      time.Duration
	mu       sync.Mutex
	sessions map[string]*sessionSeen
	swept    time.Time
}

type sessionSeen struct {
	start, last time.Time
	version     string
}

func newMetrics(mp metric.MeterProvider, ttl time.Duration) (*metrics, error) {
	meter := mp.Meter(ScopeName)
	m := &metrics{ttl: ttl, sessions: map[string]*sessionSeen{}}
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
		m.seen(req.SessionID, req.ProtocolVersion, req.Method == "initialize" && res.ErrorCode == 0)
	}
}

// opKey is what the attributes of a duration depend on.
type opKey struct{ method, name, version, errType string }

// maxAttrSets bounds the attribute sets kept for reuse; past it, sets are
// made per request.
const maxAttrSets = 4096

// opAttrs returns the attributes of a request's duration: only values of
// bounded cardinality, whatever clients send. A method the server does not
// know is "_OTHER"; a tool or prompt name is left out unless the request
// found it.
func (m *metrics) opAttrs(req *mcphandler.Request, res mcphandler.Result, errType string) []metric.RecordOption {
	k := opKey{method: req.Method, version: req.ProtocolVersion, errType: errType}
	if res.ErrorCode == mcphandler.CodeMethodNotFound {
		k.method = "_OTHER"
	}
	if len(k.version) > maxNameBytes {
		k.version = "_OTHER"
	}
	if (req.Method == "tools/call" || req.Method == "prompts/get") && found(res) {
		k.name = req.Target
	}
	if set, ok := m.sets.Load(k); ok {
		return set.([]metric.RecordOption)
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
	if m.nsets.Add(1) <= maxAttrSets {
		m.sets.Store(k, set)
	}
	return set
}

// found reports whether a tools/call or prompts/get found what it named.
func found(res mcphandler.Result) bool {
	return res.Outcome != mcphandler.OutcomeNotFound && res.ErrorCode != mcphandler.CodeInvalidParams
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

// seen notes a request of session sid (created: by an initialize here).
func (m *metrics) seen(sid, version string, created bool) {
	now := time.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.sweep(now)
	if s, ok := m.sessions[sid]; ok {
		s.last = now
	} else if created && len(m.sessions) < maxSessions {
		m.sessions[sid] = &sessionSeen{start: now, last: now, version: version}
	}
}

// sweep forgets sessions idle for the TTL, at most once a second.
func (m *metrics) sweep(now time.Time) {
	if now.Sub(m.swept) < time.Second {
		return
	}
	m.swept = now
	for id, s := range m.sessions {
		if now.Sub(s.last) > m.ttl {
			delete(m.sessions, id)
		}
	}
}

func (m *metrics) openSessions(now time.Time) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.swept = time.Time{}
	m.sweep(now)
	return len(m.sessions)
}

// sessionEnded records the duration of session sid, ended by DELETE: from
// created, the creation time its record holds, on any replica; else from
// its initialize, if that was served here. The version is the negotiated
// one (the DELETE's header, which the handler checked against the
// session, when this replica did not see the initialize).
func (m *metrics) sessionEnded(ctx context.Context, sid, version string, created time.Time) {
	m.mu.Lock()
	s, ok := m.sessions[sid]
	delete(m.sessions, sid)
	m.mu.Unlock()
	if ok {
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
	if version == "" {
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
