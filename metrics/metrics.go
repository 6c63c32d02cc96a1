package metrics

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/runstream/runstream"
	"github.com/runstream/runstream/live"
)

// Buckets of the histograms.
var (
	// latencyBuckets: 0.5 ms to about 8 s.
	latencyBuckets = prometheus.ExponentialBuckets(0.0005, 2, 15)
	// nodeBuckets: 5 ms to about 22 min.
	nodeBuckets = prometheus.ExponentialBuckets(0.005, 4, 10)
	// groupBuckets: 1 to 1024 writes per commit.
	groupBuckets = prometheus.ExponentialBuckets(1, 2, 11)
)

// scrapeTimeout bounds the store reads of one scrape (Metrics.WatchRuns).
const scrapeTimeout = 2 * time.Second

// Metrics holds runstream's collectors of the data flow, registered on
// one registry. Create it with New; it is safe for concurrent use. Its
// fields are the observers the packages take.
type Metrics struct {
	// Append observes the event logs (eventlog.Observer).
	Append *Append
	// Hub observes the live hub (live.Observer).
	Hub *Hub
	// Streams observes the SSE streams (ssestream.Observer).
	Streams *Streams
	// Engine observes the workflow engine (engine.Observer).
	Engine *Engine

	reg   prometheus.Registerer
	store string

	storeDuration *prometheus.HistogramVec
	storeErrors   *prometheus.CounterVec
	groupCommit   prometheus.Observer
	notifications *prometheus.CounterVec
	operations    *prometheus.CounterVec
}

// New registers the collectors on reg. store names the store backend
// (memory, sqlite, postgres), the store label of the store metrics.
func New(reg prometheus.Registerer, store string) *Metrics {
	m := &Metrics{reg: reg, store: store}
	m.storeDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "runstream_store_operation_duration_seconds",
		Help:    "Time of store calls, by store and operation (appends, stream reads, hub polls).",
		Buckets: latencyBuckets,
	}, []string{"store", "operation"})
	m.storeErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "runstream_store_errors_total",
		Help: "Store calls that failed, by store, operation and error code.",
	}, []string{"store", "operation", "code"})
	group := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "runstream_store_group_commit_size",
		Help:    "Writes committed together in one group transaction (sqlite, postgres).",
		Buckets: groupBuckets,
	}, []string{"store"})
	m.groupCommit = group.WithLabelValues(store)
	m.notifications = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "runstream_postgres_notifications_total",
		Help: "PostgreSQL notifications of appends received by the listener, by channel (workflow, thread, chunks).",
	}, []string{"channel"})
	m.operations = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "runstream_workflow_operations_total",
		Help: "Cancel and resume requests of workflow runs, by operation and outcome (ok or the error code).",
	}, []string{"operation", "outcome"})
	reg.MustRegister(m.storeDuration, m.storeErrors, group, m.notifications, m.operations)
	m.Append = newAppend(m)
	m.Hub = newHub(m)
	m.Streams = newStreams(m)
	m.Engine = newEngine(m)
	return m
}

// storeCall records a store call of operation that took elapsed and
// failed with err (nil: it succeeded).
func (m *Metrics) storeCall(operation string, elapsed time.Duration, err error) {
	m.storeDuration.WithLabelValues(m.store, operation).Observe(elapsed.Seconds())
	m.storeError(operation, err)
}

// storeError counts err, when not nil, as an error of operation.
func (m *Metrics) storeError(operation string, err error) {
	if err != nil {
		m.storeErrors.WithLabelValues(m.store, operation, codeOf(err)).Inc()
	}
}

// codeOf returns the error code of err as a label: a code of the
// contract, never text of the error.
func codeOf(err error) string {
	code := runstream.ErrorCodeOf(err)
	if !code.Known() {
		code = runstream.CodeInternal
	}
	return string(code)
}

// outcomeOf returns "ok" for nil, else the error code of err.
func outcomeOf(err error) string {
	if err == nil {
		return "ok"
	}
	return codeOf(err)
}

// CommitGroup records a group transaction of n writes (sqlite.Config,
// postgres.Config OnCommit).
func (m *Metrics) CommitGroup(n int) { m.groupCommit.Observe(float64(n)) }

// Notified counts a PostgreSQL notification received on channel:
// "workflow" or "thread".
func (m *Metrics) Notified(channel string) { m.notifications.WithLabelValues(channel).Inc() }

// WorkflowOutcome counts the end of a cancel or resume of a workflow run
// (workflowsvc.Config.Outcome): op is "cancel" or "resume".
func (m *Metrics) WorkflowOutcome(op string, err error) {
	if op != "cancel" && op != "resume" {
		op = "other"
	}
	m.operations.WithLabelValues(op, outcomeOf(err)).Inc()
}

// WatchStore exports the store's pool connections by state, as pool
// reports them at each scrape: inUse busy, idle open and waiting.
func (m *Metrics) WatchStore(pool func() (inUse, idle int)) {
	desc := prometheus.NewDesc("runstream_store_pool_connections",
		"Connections of the store's pool by state (in_use, idle); sqlite counts its readers and its writer, postgres its pool.",
		[]string{"state"}, prometheus.Labels{"store": m.store})
	m.reg.MustRegister(&poolCollector{desc: desc, pool: pool})
}

type poolCollector struct {
	desc *prometheus.Desc
	pool func() (inUse, idle int)
}

func (c *poolCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *poolCollector) Collect(ch chan<- prometheus.Metric) {
	inUse, idle := c.pool()
	ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(inUse), "in_use")
	ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(idle), "idle")
}

// WatchListener exports the state of the PostgreSQL listener: connected
// reports whether it listens now, reconnects how often it connected again.
func (m *Metrics) WatchListener(connected func() bool, reconnects func() int64) {
	m.reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "runstream_postgres_listener_connected",
			Help: "1 while the PostgreSQL listener (LISTEN for other instances' appends) is connected, else 0.",
		}, func() float64 {
			if connected() {
				return 1
			}
			return 0
		}),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "runstream_postgres_listener_reconnects_total",
			Help: "Times the PostgreSQL listener connected again after losing its connection or failing to connect.",
		}, func() float64 { return float64(reconnects()) }))
}

// WatchHub exports the hub's followed streams and subscriptions by kind,
// as census reports them at each scrape (live.Hub.Census with
// streams.KindOf).
func (m *Metrics) WatchHub(census func() map[string]live.Census) {
	m.reg.MustRegister(&hubCollector{census: census,
		streams: prometheus.NewDesc("runstream_live_streams",
			"Streams (workflow runs, threads) with at least one follower on this instance, by kind.", []string{"kind"}, nil),
		subscriptions: prometheus.NewDesc("runstream_live_subscriptions",
			"Hub subscriptions (one per follower) on this instance, by kind of stream.", []string{"kind"}, nil),
	})
}

type hubCollector struct {
	census                 func() map[string]live.Census
	streams, subscriptions *prometheus.Desc
}

func (c *hubCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.streams
	ch <- c.subscriptions
}

func (c *hubCollector) Collect(ch chan<- prometheus.Metric) {
	for kind, n := range c.census() {
		ch <- prometheus.MustNewConstMetric(c.streams, prometheus.GaugeValue, float64(n.Streams), kind)
		ch <- prometheus.MustNewConstMetric(c.subscriptions, prometheus.GaugeValue, float64(n.Subscriptions), kind)
	}
}

// RunCounter counts the workflow runs in each of statuses across every
// instance sharing the store, in one read; the map holds every status
// asked for (see WatchRuns).
type RunCounter func(ctx context.Context, statuses []string) (map[string]int, error)

// WatchRuns exports the workflow runs in each non-terminal status
// (queued, running, awaiting_input, cancelling) and the queue depth (the
// queued ones), as count reads them from the store at each scrape, within
// 2 s, in one read per scrape; running reports the runs this instance's
// engine executes (nil: no engine). When the count fails, the statuses are
// left out of the scrape and the failure is counted in
// runstream_store_errors_total (operation count_runs).
func (m *Metrics) WatchRuns(count RunCounter, running func() int) {
	c := &runsCollector{m: m, count: count,
		runs: prometheus.NewDesc("runstream_workflow_runs",
			"Workflow runs in each non-terminal status in the store, all instances.", []string{"status"}, nil),
		queue: prometheus.NewDesc("runstream_engine_queue_depth",
			"Workflow runs queued in the store, waiting for an engine to claim them.", nil, nil),
	}
	m.reg.MustRegister(c)
	if running != nil {
		m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "runstream_engine_runs_executing",
			Help: "Workflow runs this instance's engine is executing.",
		}, func() float64 { return float64(running()) }))
	}
}

// activeStatuses are the statuses WatchRuns counts.
var activeStatuses = []string{"queued", "running", "awaiting_input", "cancelling"}

type runsCollector struct {
	m           *Metrics
	count       RunCounter
	runs, queue *prometheus.Desc
}

func (c *runsCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.runs
	ch <- c.queue
}

func (c *runsCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	start := time.Now()
	counts, err := c.count(ctx, activeStatuses)
	c.m.storeCall("count_runs", time.Since(start), err)
	if err != nil {
		return
	}
	for _, status := range activeStatuses {
		n := counts[status]
		ch <- prometheus.MustNewConstMetric(c.runs, prometheus.GaugeValue, float64(n), status)
		if status == "queued" {
			ch <- prometheus.MustNewConstMetric(c.queue, prometheus.GaugeValue, float64(n))
		}
	}
}
