package metrics

import (
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/runstream/runstream"
)

// Append is the eventlog.Observer of Metrics.
type Append struct {
	m           *Metrics
	events      *prometheus.CounterVec
	batches     *prometheus.CounterVec
	duration    *prometheus.HistogramVec
	checks      *prometheus.CounterVec
	redactions  *prometheus.CounterVec
	idempotency *prometheus.CounterVec
	transitions *prometheus.CounterVec
}

func newAppend(m *Metrics) *Append {
	a := &Append{m: m,
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "runstream_append_events_total",
			Help: "Events stored through the event log, by kind of log (thread, workflow).",
		}, []string{"kind"}),
		batches: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "runstream_append_batches_total",
			Help: "Appends (batches) handed to the store, by kind of log and outcome (ok or the error code).",
		}, []string{"kind", "outcome"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "runstream_append_duration_seconds",
			Help:    "Time of an append through the event log: check, redact and the store's commit, by kind of log.",
			Buckets: latencyBuckets,
		}, []string{"kind"}),
		checks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "runstream_append_checks_total",
			Help: "Batches checked against the contract and the limits, by kind of log and outcome (accepted or the error code of the refusal).",
		}, []string{"kind", "outcome"}),
		redactions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "runstream_redactions_total",
			Help: "Secrets removed from event payloads before they were stored, by kind of log and redaction rule.",
		}, []string{"kind", "rule"}),
		idempotency: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "runstream_idempotency_total",
			Help: "Thread appends under an Idempotency-Key, by outcome: new, replayed, conflict (key reused for another request), unavailable.",
		}, []string{"outcome"}),
		transitions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "runstream_workflow_run_transitions_total",
			Help: "Workflow runs that entered a status (an event committed by this instance moved them), by status.",
		}, []string{"status"}),
	}
	m.reg.MustRegister(a.events, a.batches, a.duration, a.checks, a.redactions, a.idempotency, a.transitions)
	return a
}

// Checked implements eventlog.Observer.
func (a *Append) Checked(kind string, events int, err error) {
	outcome := "accepted"
	if err != nil {
		outcome = codeOf(err)
	}
	a.checks.WithLabelValues(kind, outcome).Inc()
}

// Redacted implements eventlog.Observer.
func (a *Append) Redacted(kind, rule string, n int) {
	a.redactions.WithLabelValues(kind, rule).Add(float64(n))
}

// Appended implements eventlog.Observer.
func (a *Append) Appended(kind, op string, events int, prepare, store time.Duration, err error) {
	a.m.storeCall(op, store, err)
	a.duration.WithLabelValues(kind).Observe((prepare + store).Seconds())
	a.batches.WithLabelValues(kind, outcomeOf(err)).Inc()
	if events > 0 {
		a.events.WithLabelValues(kind).Add(float64(events))
	}
}

// Looked implements eventlog.Observer.
func (a *Append) Looked(elapsed time.Duration, err error) {
	a.m.storeCall("idempotency_lookup", elapsed, err)
}

// Idempotency implements eventlog.Observer.
func (a *Append) Idempotency(outcome string) { a.idempotency.WithLabelValues(outcome).Inc() }

// RunEntered implements eventlog.Observer.
func (a *Append) RunEntered(status string) { a.transitions.WithLabelValues(status).Inc() }

// Hub is the live.Observer of Metrics.
type Hub struct {
	m       *Metrics
	polls   *prometheus.CounterVec
	wakeups *prometheus.CounterVec
	cuts    *prometheus.CounterVec
}

func newHub(m *Metrics) *Hub {
	h := &Hub{m: m,
		polls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "runstream_live_polls_total",
			Help: "Store reads of the hub's poll loop, by trigger (wake: a wake-up or held events; interval: the periodic poll) and outcome (ok, error).",
		}, []string{"trigger", "outcome"}),
		wakeups: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "runstream_live_wakeups_total",
			Help: "Wake-ups of the hub (PostgreSQL NOTIFY, held events ahead of a gap), by outcome: queued, coalesced, delivered (already delivered), unfollowed, dropped.",
		}, []string{"outcome"}),
		cuts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "runstream_live_cuts_total",
			Help: "Subscriptions cut by the hub, by reason: buffer_full (a slow follower), gap (events released past missing seqs).",
		}, []string{"reason"}),
	}
	m.reg.MustRegister(h.polls, h.wakeups, h.cuts)
	return h
}

// Polled implements live.Observer.
func (h *Hub) Polled(woken bool, elapsed time.Duration, err error) {
	trigger, outcome := "interval", "ok"
	if woken {
		trigger = "wake"
	}
	if err != nil {
		outcome = "error"
	}
	h.polls.WithLabelValues(trigger, outcome).Inc()
	h.m.storeCall("live_poll", elapsed, err)
}

// Woken implements live.Observer.
func (h *Hub) Woken(outcome string) { h.wakeups.WithLabelValues(outcome).Inc() }

// Cut implements live.Observer.
func (h *Hub) Cut(reason string) { h.cuts.WithLabelValues(reason).Inc() }

// Streams is the ssestream.Observer of Metrics.
type Streams struct {
	m        *Metrics
	open     *prometheus.GaugeVec
	closed   *prometheus.CounterVec
	frames   *prometheus.CounterVec
	bytes    *prometheus.CounterVec
	reads    *prometheus.CounterVec
	catchUps *prometheus.CounterVec
	// written maps a stream kind to its frames and bytes counters, looked
	// up in the vectors once (Wrote is called at every write to a
	// follower); copied on write under writtenMu.
	written   atomic.Pointer[map[string]writtenCounters]
	writtenMu sync.Mutex
}

// writtenCounters are the frames and bytes counters of one stream kind.
type writtenCounters struct{ frames, bytes prometheus.Counter }

func newStreams(m *Metrics) *Streams {
	s := &Streams{m: m,
		open: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "runstream_sse_streams_open",
			Help: "SSE streams open on this instance, by kind (workflow, thread).",
		}, []string{"kind"}),
		closed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "runstream_sse_streams_closed_total",
			Help: "SSE streams ended, by kind and reason: done, write_timeout (a slow follower cut), error.",
		}, []string{"kind", "reason"}),
		frames: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "runstream_sse_frames_total",
			Help: "Event frames written to SSE followers, by kind.",
		}, []string{"kind"}),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "runstream_sse_bytes_total",
			Help: "Bytes written to SSE followers (frames, heartbeats, retry fields), by kind.",
		}, []string{"kind"}),
		reads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "runstream_sse_store_reads_total",
			Help: "Pages read from the store by followers catching up, by kind and outcome (ok, error).",
		}, []string{"kind", "outcome"}),
		catchUps: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "runstream_sse_catchups_total",
			Help: "Times a follower read the store instead of live events, by kind and reason: start (the replay after its cursor), cut (the hub cut it: it fell behind), gap.",
		}, []string{"kind", "reason"}),
	}
	m.reg.MustRegister(s.open, s.closed, s.frames, s.bytes, s.reads, s.catchUps)
	return s
}

// Opened implements ssestream.Observer.
func (s *Streams) Opened(kind string) { s.open.WithLabelValues(kind).Inc() }

// Closed implements ssestream.Observer.
func (s *Streams) Closed(kind, reason string) {
	s.open.WithLabelValues(kind).Dec()
	s.closed.WithLabelValues(kind, reason).Inc()
}

// Wrote implements ssestream.Observer.
func (s *Streams) Wrote(kind string, frames, bytes int) {
	c := s.writtenOf(kind)
	if frames > 0 {
		c.frames.Add(float64(frames))
	}
	c.bytes.Add(float64(bytes))
}

// writtenOf returns kind's frames and bytes counters.
func (s *Streams) writtenOf(kind string) writtenCounters {
	if m := s.written.Load(); m != nil {
		if c, ok := (*m)[kind]; ok {
			return c
		}
	}
	s.writtenMu.Lock()
	defer s.writtenMu.Unlock()
	m := make(map[string]writtenCounters)
	if old := s.written.Load(); old != nil {
		maps.Copy(m, *old)
	}
	c, ok := m[kind]
	if !ok {
		c = writtenCounters{s.frames.WithLabelValues(kind), s.bytes.WithLabelValues(kind)}
		m[kind] = c
		s.written.Store(&m)
	}
	return c
}

// StoreRead implements ssestream.Observer.
func (s *Streams) StoreRead(kind string, elapsed time.Duration, err error) {
	outcome := "ok"
	if err != nil {
		outcome = "error"
	}
	s.reads.WithLabelValues(kind, outcome).Inc()
	s.m.storeCall("stream_read", elapsed, err)
}

// CatchUp implements ssestream.Observer.
func (s *Streams) CatchUp(kind, reason string) { s.catchUps.WithLabelValues(kind, reason).Inc() }

// Engine is the engine.Observer of Metrics.
type Engine struct {
	m         *Metrics
	claims    *prometheus.CounterVec
	takeovers prometheus.Counter
	renewals  *prometheus.CounterVec
	nodes     *prometheus.HistogramVec
	retries   *prometheus.CounterVec
}

func newEngine(m *Metrics) *Engine {
	e := &Engine{m: m,
		claims: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "runstream_engine_claims_total",
			Help: "Workflow runs claimed by this instance's engine, by the status they had (queued: a start; running, cancelling: a takeover).",
		}, []string{"status"}),
		takeovers: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "runstream_engine_lease_takeovers_total",
			Help: "Claims of runs already started: another lease expired (a crash) or was released (a shutdown, a resume).",
		}),
		renewals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "runstream_engine_lease_renewals_total",
			Help: "Lease renewals of running runs, by outcome: ok, lost (another worker holds the run: it stops), error.",
		}, []string{"outcome"}),
		nodes: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "runstream_engine_node_duration_seconds",
			Help:    "Time of node attempts, by node type and outcome (completed, failed, parked, stopped).",
			Buckets: nodeBuckets,
		}, []string{"node_type", "outcome"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "runstream_engine_node_retries_total",
			Help: "Failed node attempts that will be retried, by node type.",
		}, []string{"node_type"}),
	}
	m.reg.MustRegister(e.claims, e.takeovers, e.renewals, e.nodes, e.retries)
	return e
}

// Claimed implements engine.Observer.
func (e *Engine) Claimed(status string) {
	e.claims.WithLabelValues(status).Inc()
	if status != "queued" {
		e.takeovers.Inc()
	}
}

// LeaseRenewed implements engine.Observer.
func (e *Engine) LeaseRenewed(err error) {
	outcome := "ok"
	switch runstream.ErrorCodeOf(err) {
	case "":
	case runstream.CodeConflict, runstream.CodeWorkflowRunNotFound:
		outcome = "lost"
	default:
		outcome = "error"
		e.m.storeError("renew_lease", err)
	}
	e.renewals.WithLabelValues(outcome).Inc()
}

// NodeAttempted implements engine.Observer.
func (e *Engine) NodeAttempted(nodeType, outcome string, elapsed time.Duration) {
	e.nodes.WithLabelValues(nodeType, outcome).Observe(elapsed.Seconds())
}

// NodeRetried implements engine.Observer.
func (e *Engine) NodeRetried(nodeType string) { e.retries.WithLabelValues(nodeType).Inc() }
