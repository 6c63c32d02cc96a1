package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/runstream/runstream"
	"github.com/runstream/runstream/contracts"
	"github.com/runstream/runstream/engine"
	"github.com/runstream/runstream/engine/nodeset"
	"github.com/runstream/runstream/engine/sqlnode"
	"github.com/runstream/runstream/eventlog"
	"github.com/runstream/runstream/health"
	"github.com/runstream/runstream/httpapi"
	"github.com/runstream/runstream/journal/workflowllm"
	"github.com/runstream/runstream/langgraph"
	"github.com/runstream/runstream/live"
	"github.com/runstream/runstream/metrics"
	"github.com/runstream/runstream/seal"
	"github.com/runstream/runstream/streams"
	"github.com/runstream/runstream/threadsvc"
	"github.com/runstream/runstream/workflow"
	"github.com/runstream/runstream/workflowsvc"
)

// app is a running server's parts: the store, the live hub with its poll
// loop, the event log and the HTTP API.
type app struct {
	backend *backend
	hub     *live.Hub
	log     *eventlog.WorkflowLog
	api     *httpapi.Server
	// workflows is the workflow service the API serves.
	workflows *workflowsvc.Service
	// langgraph serves the LangGraph run streams; nil without a chunk
	// store.
	langgraph *langgraph.Service
	stop      context.CancelFunc
	// engine executes workflow runs; nil when disabled (--workers 0).
	engine          *engine.Engine
	engineStop      sync.Once
	shutdownTimeout time.Duration
	logger          *slog.Logger
	// sqlDatabases are the databases of the sql nodes, closed last.
	sqlDatabases *sqlnode.Databases
	// metrics are the data flow's collectors, on the registry /metrics
	// serves.
	metrics *metrics.Metrics
}

// newApp opens the store, starts the hub's poll loop and, unless
// cfg.workers is 0, the workflow engine. It fails when any of them cannot
// start. Close it with app.close.
func newApp(ctx context.Context, cfg serveConfig, logger *slog.Logger) (*app, error) {
	open := cfg.openBackend
	if open == nil {
		open = openBackend
	}
	promRegistry := prometheus.NewRegistry()
	promRegistry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m := metrics.New(promRegistry, storeKind(cfg.store))
	cfg.onCommit = m.CommitGroup
	backend, err := open(ctx, cfg, logger)
	if err != nil {
		return nil, err
	}
	// Everything above the store sees resume tokens plain; the store
	// keeps them sealed.
	sealer, err := newSealer(cfg, backend.name, logger)
	if err != nil {
		backend.close()
		return nil, err
	}
	backend.workflows = seal.WorkflowStore(backend.workflows, sealer)
	validator, err := contracts.NewValidator()
	if err != nil {
		backend.close()
		return nil, fmt.Errorf("load contracts: %w", err)
	}
	poll := streams.StreamPoller(backend.workflows, backend.threads)
	if backend.chunks != nil {
		poll = langgraph.Poller(backend.chunks, poll)
	}
	hub := live.New(live.Config{Poll: poll, Logger: logger, Observer: m.Hub})
	loopCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	go hub.Run(loopCtx)
	a := &app{backend: backend, hub: hub, stop: stop, shutdownTimeout: cfg.shutdownTimeout, logger: logger, metrics: m}
	a.log = eventlog.NewWorkflowLog(backend.workflows, validator, hub, nil)
	a.log.MaxEventBytes = cfg.maxEventBytes
	a.log.Observer = m.Append
	var threadLog *eventlog.ThreadLog
	if backend.runEvents != nil {
		threadLog = eventlog.NewThreadLog(backend.runEvents, validator, hub, eventlog.ThreadLimits{})
		threadLog.Observer = m.Append
	}
	var threads *threadsvc.Service
	if backend.runEvents != nil && backend.threads != nil && backend.runs != nil {
		// Without them the thread endpoints answer UNAVAILABLE.
		threads = threadsvc.New(backend.runEvents, backend.threads, backend.runs, threadLog, hub, threadsvc.Config{ContextWindows: cfg.contextWindows})
	}
	a.startLangGraph(loopCtx, cfg, threads)
	a.listen(ctx, loopCtx)
	// One registry of node types for publishing and for running, and one
	// artifact storage for the engine that writes and the API that reads.
	registry, blobs, err := a.nodeTypes(cfg, backend, threads)
	if err != nil {
		a.close()
		return nil, err
	}
	notify, err := a.startEngine(loopCtx, cfg, registry, blobs)
	if err != nil {
		a.close()
		return nil, err
	}
	a.workflows = workflowsvc.New(backend.workflows, a.log, hub, workflowsvc.Config{Definitions: registry, Notify: notify, Artifacts: blobs, Outcome: m.WorkflowOutcome})
	a.watch()
	a.api = httpapi.New(httpapi.Config{
		Logger:        logger,
		Registry:      promRegistry,
		Contracts:     contracts.FS(),
		ContractNames: contracts.Names(),
		Ready:         a.ready,
		Durability:    backend.durability,
		Store:         backend.name,
		MaxBodyBytes:  cfg.maxBodyBytes,
		BodyTimeout:   cfg.bodyTimeout,
		Version:       version,
		Stream:        httpapi.StreamConfig{MaxPerUser: cfg.maxStreamsPerUser, MaxLifetime: cfg.auth.streamLifetime, WriteTimeout: cfg.streamWriteTimeout, Observer: m.Streams},
		Auth:          cfg.auth.api,
		AppendRate:    httpapi.AppendRate{PerSecond: cfg.auth.appendRate, Burst: cfg.auth.appendBurst},
		Tracing:       cfg.tracing,
	}, a.workflows, threads)
	if a.langgraph != nil {
		h := langgraph.HTTP{Mount: a.api.Mount, User: httpapi.User, WriteError: a.api.WriteError, Expires: httpapi.CredentialExpires, Kit: httpapi.ThreadKit(),
			AcquireStream: a.api.AcquireStream, AfterRevoke: a.api.AfterRevoke}
		if threads != nil {
			h.StoreOnly = threads.StoreOnlyRun
		}
		a.langgraph.Mount(h)
	}
	return a, nil
}

// startLangGraph starts the LangGraph run streams' service (package
// langgraph) when the store keeps chunks, its sweeper running until
// loopCtx ends; the PostgreSQL listener wakes it for other instances'
// pushes.
func (a *app) startLangGraph(loopCtx context.Context, cfg serveConfig, threads *threadsvc.Service) {
	if a.backend.chunks == nil {
		return
	}
	lgCfg := langgraph.Config{Lease: cfg.chunkLease, ChunkTTL: cfg.chunkTTL, MaxChunks: cfg.maxChunksPerRun,
		MaxChunkBytes: cfg.maxChunkBytes, MaxLifetime: cfg.auth.streamLifetime, Logger: a.logger}
	if threads != nil {
		lgCfg.Writable = threads.ClaimWritable
	}
	lg := langgraph.New(a.backend.chunks, a.hub, lgCfg)
	a.backend.wakeChunks = func(runID string, seq int64) {
		a.metrics.Notified("chunks")
		lg.Wake(runID, seq)
	}
	a.langgraph = lg
	go lg.Run(loopCtx)
}

// listen starts the PostgreSQL listener, when the store has one, until
// loopCtx ends, and waits for its first connection (waitListener). An
// append this instance published itself is delivered already: the
// listener drops the notifications of the thread appends the thread log
// publishes (the store's group commit hook, to a.hub), and WakeSeq
// ignores the others'.
func (a *app) listen(ctx, loopCtx context.Context) {
	if a.backend.listen == nil {
		return
	}
	go a.backend.listen(loopCtx,
		func(runID string, seq int64) {
			a.metrics.Notified("workflow")
			a.hub.WakeSeq(streams.WorkflowStreamKey(runID), seq)
		},
		func(threadID string, seq int64) {
			a.metrics.Notified("thread")
			a.hub.WakeSeq(streams.ThreadStreamKey(threadID), seq)
		})
	a.waitListener(ctx)
}

// startEngine starts the workflow engine unless cfg.workers is 0, and
// returns what tells it of the runs the service queues, resumes or
// cancels (nil without an engine).
func (a *app) startEngine(loopCtx context.Context, cfg serveConfig, registry *engine.Registry, blobs engine.ArtifactBlobs) (notify func(ctx context.Context, runID string), err error) {
	if cfg.workers <= 0 {
		return nil, nil
	}
	eng, err := engine.New(engine.Config{Store: a.backend.workflows, Log: a.log, Registry: registry, Workers: cfg.workers, MaxRunsPerOwner: cfg.maxRunsPerUser, WorkerID: cfg.workerID, LeaseDuration: cfg.leaseDuration, Logger: a.logger, Artifacts: blobs,
		MaxOutputBytes: cfg.maxOutputBytes, MaxRunOutputBytes: cfg.maxRunOutputBytes, MaxArtifactBytes: cfg.maxArtifactBytes, Observer: a.metrics.Engine})
	if err == nil {
		err = eng.Start(loopCtx)
	}
	if err != nil {
		return nil, fmt.Errorf("start the workflow engine (--workers 0 serves without one): %w", err)
	}
	a.engine = eng
	a.logger.Info("workflow engine started", "worker_id", eng.WorkerID(), "workers", cfg.workers)
	return eng.NotifyContext, nil
}

// listenerStartWait bounds how long newApp waits for the PostgreSQL
// listener's first connection.
const listenerStartWait = 5 * time.Second

// waitListener waits, up to listenerStartWait, for the PostgreSQL
// listener's first connection, so that the server answers /readyz ready
// and its followers hear other instances from its first request. Past
// that it goes on: the listener keeps retrying, /readyz names it.
func (a *app) waitListener(ctx context.Context) {
	if a.backend.listener == nil {
		return
	}
	deadline := time.Now().Add(listenerStartWait)
	for {
		if connected, _ := a.backend.listener(); connected {
			return
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			a.logger.Warn("the PostgreSQL listener is not connected yet; serving without it until it connects", "waited", listenerStartWait)
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// watch exports the state the metrics read at each scrape: the hub's
// streams, the store's runs and pool, the engine's runs, the listener.
func (a *app) watch() {
	m, b := a.metrics, a.backend
	m.WatchHub(func() map[string]live.Census { return a.hub.Census(streams.KindOf) })
	var running func() int
	if a.engine != nil {
		running = a.engine.Running
	}
	m.WatchRuns(func(ctx context.Context, statuses []string) (map[string]int, error) {
		asked := make([]workflow.RunStatus, len(statuses))
		for i, s := range statuses {
			asked[i] = workflow.RunStatus(s)
		}
		counts, err := b.workflows.CountRuns(ctx, asked)
		out := make(map[string]int, len(counts))
		for status, n := range counts {
			out[string(status)] = n
		}
		return out, err
	}, running)
	pool := b.pool
	if pool == nil {
		pool = func() (int, int) { return 0, 0 }
	}
	m.WatchStore(pool)
	if b.listener != nil {
		m.WatchListener(func() bool { connected, _ := b.listener(); return connected },
			func() int64 { _, n := b.listener(); return n })
	}
}

// ready checks the parts of the server for /readyz: the store, the
// PostgreSQL listener when there is one, the engine when it runs.
func (a *app) ready(ctx context.Context) (map[string]health.Status, error) {
	parts := []health.Part{{Name: "store", Check: func(ctx context.Context) error {
		if err := a.backend.ready(ctx); err != nil {
			return runstream.Wrap(err, runstream.CodeUnavailable, "the %s store is not reachable", a.backend.name)
		}
		return nil
	}}}
	if a.backend.listener != nil {
		parts = append(parts, health.Part{Name: "listener", Check: func(context.Context) error {
			if connected, _ := a.backend.listener(); !connected {
				return runstream.Errorf(runstream.CodeUnavailable, "the PostgreSQL listener is not connected: other instances' events reach this one's followers only at the poll interval")
			}
			return nil
		}})
	}
	if a.engine != nil {
		parts = append(parts, health.Part{Name: "engine", Check: func(context.Context) error { return a.engine.Health() }})
	}
	return health.Check(ctx, parts)
}

// close stops the engine gracefully (its runs reach a safe point and are
// released, within the shutdown timeout), then the background loops, and
// closes the store.
func (a *app) close() error {
	timeout := a.shutdownTimeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	a.stopEngine(ctx)
	cancel()
	a.stop()
	return errors.Join(a.backend.close(), a.sqlDatabases.Close())
}

// stopEngine stops the engine once: its runners stop at a safe point and
// release their leases, or are abandoned when ctx ends first (the error
// then, logged; their leases expire and another instance takes over).
func (a *app) stopEngine(ctx context.Context) error {
	if a.engine == nil {
		return nil
	}
	var err error
	a.engineStop.Do(func() {
		if err = a.engine.Stop(ctx); err != nil {
			a.logger.Warn("workflow engine abandoned its runs at shutdown", "error", err)
		}
	})
	return err
}

// nodeTypes opens the sql nodes' databases and the artifact storage (in
// memory for a memory store or without a data directory, else files
// under DATA_DIR/artifacts) and returns the registry of every node type.
// With threads, llm nodes journal each attempt into the workflow run's
// thread (journal/workflowllm).
func (a *app) nodeTypes(cfg serveConfig, backend *backend, threads *threadsvc.Service) (*engine.Registry, engine.ArtifactBlobs, error) {
	var blobs engine.ArtifactBlobs = engine.NewMemoryBlobs()
	if backend.name != "memory" && cfg.dataDir != "" {
		files, err := engine.NewFileBlobs(filepath.Join(cfg.dataDir, "artifacts"))
		if err != nil {
			return nil, nil, err
		}
		blobs = files
	}
	dbs, err := sqlnode.Open(cfg.sqlDatabases...)
	if err != nil {
		return nil, nil, err
	}
	a.sqlDatabases = dbs
	if names := dbs.Names(); len(names) > 0 {
		a.logger.Info("sql databases", "names", names)
	}
	nodes := nodeset.Config{SQL: dbs, OpenAIAPIKey: cfg.openAIAPIKey, OpenAIKeyBaseURLs: cfg.openAIKeyBases, HTTP: engine.HTTPOptions{Allow: cfg.httpAllow, Secrets: cfg.secrets}}
	if threads != nil {
		nodes.LLMObserver = workflowllm.Observer(workflowllm.Config{Threads: threads, Runs: backend.workflows, Logger: a.logger})
	}
	registry, err := nodeset.Registry(nodes)
	if err != nil {
		return nil, nil, err
	}
	return registry, blobs, nil
}
