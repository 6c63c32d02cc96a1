package engine

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/eventlog"
	"github.com/runstream/runstream/workflow"
)

// Defaults of Config.
const (
	DefaultWorkers        = 4
	DefaultLeaseDuration  = 30 * time.Second
	DefaultPollInterval   = 500 * time.Millisecond
	DefaultResumeTokenTTL = 24 * time.Hour
	// DefaultMaxOutputBytes bounds a node's output (its JSON).
	DefaultMaxOutputBytes = 1 << 20
	// DefaultMaxRunOutputBytes bounds the node outputs of one run, all
	// together.
	DefaultMaxRunOutputBytes = 32 << 20
	// DefaultMaxArtifactBytes bounds the content of an artifact.
	DefaultMaxArtifactBytes = 1 << 20
	// DefaultProgressInterval is the shortest time between two stored
	// node.progress events of one node attempt.
	DefaultProgressInterval = 100 * time.Millisecond
)

// Config configures an Engine.
type Config struct {
	// Store holds the runs. It must implement workflow.Queue and
	// workflow.NodeOutputStore. Required.
	Store workflow.Store
	// Log writes every event of the engine. Required.
	Log *eventlog.WorkflowLog
	// Registry holds the node types. Defaults to DefaultRegistry().
	Registry *Registry
	// Workers bounds the runs this instance executes at once. Defaults to
	// DefaultWorkers.
	Workers int
	// MaxRunsPerOwner caps the runs of one owner that the engines sharing
	// the store execute at once, counted in the store (every instance's
	// leases, not this instance's): a queued run past it stays queued
	// until one of the owner's runs ends, even with workers idle. Runs
	// taken over after a lost worker, and cancelling runs, are not held
	// back (see workflow.Queue). 0, the default, means no cap: one owner
	// alone may use every worker. Whatever the cap, claims prefer the
	// owners that execute fewer runs (round robin past
	// workflow.ClaimWindow owners), so when a worker frees up another
	// owner's waiting run comes before the rest of a backlog; a cap is
	// for deployments that want workers held back from any one owner.
	MaxRunsPerOwner int
	// WorkerID names this instance in leases; instances sharing a store
	// need distinct ids. Defaults to host name, process id and a random
	// suffix.
	WorkerID string
	// LeaseDuration is how long a claim lasts unless renewed; it is renewed
	// every third of it. A run whose lease could not be renewed is stopped
	// (nothing more is written, its nodes' contexts are cancelled) a fifth
	// of it before the lease expires, so node functions should return
	// within that margin once their context is done. Defaults to
	// DefaultLeaseDuration.
	LeaseDuration time.Duration
	// PollInterval is how often the engine looks for claimable runs and
	// checks its runs for cancellation. Defaults to DefaultPollInterval.
	PollInterval time.Duration
	// DeltaWindow is how long node.output.delta text is merged before it
	// is stored, clamped to MinDeltaWindow..MaxDeltaWindow. Defaults to
	// DefaultDeltaWindow.
	DeltaWindow time.Duration
	// DeltaMaxBytes stores merged delta text once a channel holds this
	// many bytes. Defaults to DefaultDeltaMaxBytes.
	DeltaMaxBytes int
	// ResumeTokenTTL is the default lifetime of a resume token. Defaults
	// to DefaultResumeTokenTTL.
	ResumeTokenTTL time.Duration
	// Clock is the time of leases and of the times written in events.
	// Defaults to time.Now. Waits (delays, backoff, timeouts, pacing) use
	// timers, not Clock.
	Clock func() time.Time
	// Logger receives the engine's errors. Defaults to a discarding logger.
	Logger *slog.Logger
	// Artifacts stores the bytes of the artifacts nodes declare; the API
	// that serves them must read the same blobs. Defaults to a new
	// MemoryBlobs.
	Artifacts ArtifactBlobs
	// MaxOutputBytes bounds the JSON of a node's output; a node past it
	// fails with WORKFLOW_NODE_LIMIT_EXCEEDED (details.limit
	// "output_bytes"). The run's output must besides fit in its
	// run.completed event (Log.MaxEventBytes). Defaults to
	// DefaultMaxOutputBytes.
	MaxOutputBytes int
	// MaxRunOutputBytes bounds the outputs of a run's nodes all together
	// (what the run keeps in memory and stores for its nodes); the node
	// whose output would pass it fails with WORKFLOW_NODE_LIMIT_EXCEEDED
	// (details.limit "run_output_bytes"). Defaults to
	// DefaultMaxRunOutputBytes.
	MaxRunOutputBytes int
	// MaxArtifactBytes bounds the content of an artifact; a node past it
	// fails with WORKFLOW_NODE_LIMIT_EXCEEDED (details.limit
	// "artifact_bytes"). An artifact is its node's output, so
	// MaxOutputBytes bounds it too. Defaults to DefaultMaxArtifactBytes.
	MaxArtifactBytes int
	// ProgressInterval is the shortest time between two node.progress
	// events of one node attempt: a node reporting more often has the
	// extra reports dropped. Defaults to DefaultProgressInterval.
	ProgressInterval time.Duration
	// Observer is told of claims, lease renewals, node attempts and
	// retries (metrics). Nil: none.
	Observer Observer
}

// Engine executes workflow runs: it claims runs from the store's queue,
// runs their nodes and writes their events. Several engines, in one or in
// several processes, may share a store. Create it with New, run it with
// Start and Stop.
type Engine struct {
	cfg      Config
	store    workflow.Store
	queue    workflow.Queue
	outputs  workflow.NodeOutputStore
	registry *Registry
	logger   *slog.Logger

	mu       sync.Mutex
	started  bool
	stopping bool
	runs     map[string]*runner
	// parents are the spans that queued or resumed runs (NotifyContext);
	// previous the last executions of runs that yielded or were lost,
	// linked from their next one.
	parents, previous runParents
	// hardCtx is cancelled when the engine abandons its runs.
	hardCtx context.Context
	abandon context.CancelFunc
	// drain is closed by Stop: claim nothing more, bring runs to a safe
	// point and release them.
	drain    chan struct{}
	wake     chan struct{}
	loopDone chan struct{}
	runners  sync.WaitGroup
	// claimErr is the error of the last claim, nil when it succeeded
	// (Health). Guarded by mu.
	claimErr error
}

// New returns an engine. It fails when a required field is missing or the
// store lacks the queue capabilities.
func New(cfg Config) (*Engine, error) {
	if cfg.Store == nil || cfg.Log == nil {
		return nil, errors.New("new engine: Store and Log are required")
	}
	queue, ok := cfg.Store.(workflow.Queue)
	if !ok {
		return nil, fmt.Errorf("new engine: store %T does not implement workflow.Queue", cfg.Store)
	}
	outputs, ok := cfg.Store.(workflow.NodeOutputStore)
	if !ok {
		return nil, fmt.Errorf("new engine: store %T does not implement workflow.NodeOutputStore", cfg.Store)
	}
	if cfg.Registry == nil {
		cfg.Registry = DefaultRegistry()
	}
	if cfg.Workers <= 0 {
		cfg.Workers = DefaultWorkers
	}
	if cfg.MaxRunsPerOwner < 0 {
		return nil, errors.New("new engine: MaxRunsPerOwner must not be negative")
	}
	if cfg.WorkerID == "" {
		var suffix [4]byte
		rand.Read(suffix[:])
		cfg.WorkerID = DefaultWorkerID() + "-" + hex.EncodeToString(suffix[:])
	}
	if cfg.LeaseDuration <= 0 {
		cfg.LeaseDuration = DefaultLeaseDuration
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = DefaultPollInterval
	}
	if cfg.DeltaWindow <= 0 {
		cfg.DeltaWindow = DefaultDeltaWindow
	}
	cfg.DeltaWindow = min(max(cfg.DeltaWindow, MinDeltaWindow), MaxDeltaWindow)
	if cfg.DeltaMaxBytes <= 0 {
		cfg.DeltaMaxBytes = DefaultDeltaMaxBytes
	}
	if cfg.ResumeTokenTTL <= 0 {
		cfg.ResumeTokenTTL = DefaultResumeTokenTTL
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if cfg.Artifacts == nil {
		cfg.Artifacts = NewMemoryBlobs()
	}
	if cfg.MaxOutputBytes <= 0 {
		cfg.MaxOutputBytes = DefaultMaxOutputBytes
	}
	if cfg.MaxRunOutputBytes <= 0 {
		cfg.MaxRunOutputBytes = DefaultMaxRunOutputBytes
	}
	if cfg.MaxArtifactBytes <= 0 {
		cfg.MaxArtifactBytes = DefaultMaxArtifactBytes
	}
	if cfg.ProgressInterval <= 0 {
		cfg.ProgressInterval = DefaultProgressInterval
	}
	if cfg.Observer == nil {
		cfg.Observer = nopObserver{}
	}
	return &Engine{
		cfg: cfg, store: cfg.Store, queue: queue, outputs: outputs, registry: cfg.Registry,
		logger: cfg.Logger.With("worker_id", cfg.WorkerID),
		runs:   map[string]*runner{},
		drain:  make(chan struct{}),
		wake:   make(chan struct{}, 1),
	}, nil
}

// DefaultWorkerID returns the host name and process id, "host:pid".
func DefaultWorkerID() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	return fmt.Sprintf("%s:%d", host, os.Getpid())
}

// WorkerID returns the id this engine claims runs with.
func (e *Engine) WorkerID() string { return e.cfg.WorkerID }

// Registry returns the engine's node types.
func (e *Engine) Registry() *Registry { return e.registry }

func (e *Engine) now() time.Time { return e.cfg.Clock() }

// Start starts claiming and executing runs in the background and returns.
// Cancelling ctx abandons every run at once, as if the process died: the
// engine writes nothing more and releases nothing, so the runs' leases
// expire and another instance takes them over. Use Stop for a graceful
// shutdown. An engine starts once.
func (e *Engine) Start(ctx context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.started {
		return errors.New("engine: already started")
	}
	e.started = true
	e.hardCtx, e.abandon = context.WithCancel(ctx)
	e.loopDone = make(chan struct{})
	go e.loop()
	return nil
}

// Stop shuts the engine down gracefully: it claims nothing more, lets each
// run reach a safe point (its running nodes finish; no node or retry
// starts), and releases the run's lease so another instance continues it.
//
// When ctx has a deadline, the node attempts still running a little before
// it (a quarter of the time Stop was given, at most MaxInterruptMargin)
// are interrupted: their context is cancelled, and each attempt that
// returns is written as node.failed with WORKFLOW_WORKER_LOST and
// details.reason "shutdown". The attempt of a repeatable node
// (NodeType.Repeatable) does not count against its retry.maxAttempts;
// another's counts, and fails the node (and its run) when the policy has
// no attempt left. The instance that continues the run starts the next
// attempt at once.
//
// When ctx ends first, the remaining runs (those whose nodes did not
// return) are abandoned (see Start) and Stop returns ctx's error once
// their goroutines have returned.
func (e *Engine) Stop(ctx context.Context) error {
	e.mu.Lock()
	if !e.started {
		e.mu.Unlock()
		return nil
	}
	if !e.stopping {
		e.stopping = true
		close(e.drain)
	}
	e.mu.Unlock()
	done := make(chan struct{})
	go func() {
		<-e.loopDone
		e.runners.Wait()
		close(done)
	}()
	var interrupt <-chan time.Time
	if deadline, ok := ctx.Deadline(); ok {
		left := time.Until(deadline)
		t := time.NewTimer(left - interruptMargin(left))
		defer t.Stop()
		interrupt = t.C
	}
	for {
		select {
		case <-done:
			e.abandon()
			return nil
		case <-interrupt:
			interrupt = nil
			e.interruptNodes()
		case <-ctx.Done():
			e.abandon()
			<-done
			return ctx.Err()
		}
	}
}

// MaxInterruptMargin bounds how long before Stop's deadline the running
// node attempts are interrupted.
const MaxInterruptMargin = 5 * time.Second

// interruptMargin is how long before the end of a stop given left the
// running node attempts are interrupted: time for them to return, for
// their node.failed and the pending deltas to be written and the leases
// released.
func interruptMargin(left time.Duration) time.Duration {
	return min(left/4, MaxInterruptMargin)
}

// interruptNodes stops the running node attempts of every run with
// errShutdown (see Stop).
func (e *Engine) interruptNodes() {
	e.mu.Lock()
	runners := slices.Collect(maps.Values(e.runs))
	e.mu.Unlock()
	if len(runners) > 0 {
		e.logger.Warn("interrupting the running nodes before the shutdown deadline", "runs", len(runners))
	}
	for _, r := range runners {
		r.stopNodes(errShutdown)
	}
}

// Notify tells the engine that a run changed (queued, resumed, asked to
// cancel), so it reacts before its next poll. It never blocks.
func (e *Engine) Notify(runID string) {
	e.mu.Lock()
	r := e.runs[runID]
	e.mu.Unlock()
	if r != nil {
		select {
		case r.poke <- struct{}{}:
		default:
		}
	}
	e.Wake()
}

// Wake makes the engine look for claimable runs now. It never blocks.
func (e *Engine) Wake() {
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

// Running returns the number of runs the engine is executing.
func (e *Engine) Running() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.runs)
}

// Health returns nil while the engine claims runs: it was started, is not
// stopping, and its last claim did not fail. Otherwise an UNAVAILABLE
// error says why (/readyz).
func (e *Engine) Health() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	switch {
	case !e.started:
		return runstream.Errorf(runstream.CodeUnavailable, "the workflow engine is not started")
	case e.stopping || e.hardCtx.Err() != nil:
		return runstream.Errorf(runstream.CodeUnavailable, "the workflow engine is stopping")
	case e.claimErr != nil:
		return runstream.Wrap(e.claimErr, runstream.CodeUnavailable, "the workflow engine cannot claim runs: %s", runstream.ErrorMessage(e.claimErr))
	}
	return nil
}

// loop claims runs until the engine stops or is abandoned.
func (e *Engine) loop() {
	defer close(e.loopDone)
	t := time.NewTicker(e.cfg.PollInterval)
	defer t.Stop()
	for {
		e.claimRuns()
		select {
		case <-e.hardCtx.Done():
			return
		case <-e.drain:
			return
		case <-e.wake:
		case <-t.C:
		}
	}
}

// claimRuns claims runs while a worker slot is free and the queue gives
// one (none may be claimable under the cap: the next poll, or the end of
// one of this engine's runs, tries again).
func (e *Engine) claimRuns() {
	for {
		e.mu.Lock()
		full := len(e.runs) >= e.cfg.Workers || e.stopping
		e.mu.Unlock()
		if full || e.hardCtx.Err() != nil {
			return
		}
		// Every claim has an owner of its own, so that a runner of this
		// engine whose lease expired is fenced off from the runner of its
		// next claim of the same run, as another instance's would be.
		owner := e.cfg.WorkerID + "/" + NewID("lease")
		now := e.now()
		leaseUntil := now.Add(e.cfg.LeaseDuration)
		// A claim that does not answer in time is abandoned, so that a store
		// that hangs cannot block Stop; had it committed, its lease expires
		// unused and the run is claimed again.
		ctx, cancel := context.WithTimeout(e.hardCtx, e.cfg.LeaseDuration/storeCallDivisor)
		run, ok, err := e.queue.Claim(ctx, owner, now, leaseUntil, e.cfg.MaxRunsPerOwner)
		cancel()
		e.mu.Lock()
		e.claimErr = err
		e.mu.Unlock()
		if err != nil {
			if e.hardCtx.Err() == nil {
				e.logger.Error("claim runs", "error", err)
			}
			return
		}
		if !ok {
			return
		}
		e.cfg.Observer.Claimed(string(run.Status))
		e.start(run, owner, leaseUntil)
	}
}

// start executes a run claimed with lease owner until leaseUntil in its
// own goroutine.
func (e *Engine) start(run workflow.Run, owner string, leaseUntil time.Time) {
	r := newRunner(e, run, owner, leaseUntil)
	e.mu.Lock()
	e.runs[run.ID] = r
	e.mu.Unlock()
	e.runners.Go(func() {
		defer func() {
			e.mu.Lock()
			if e.runs[run.ID] == r { // a later claim of the run may have replaced r
				delete(e.runs, run.ID)
			}
			e.mu.Unlock()
			e.Wake() // a slot is free, and a parked or released run may be claimable
		}()
		r.execute()
	})
}

// releaseLease gives a run's lease back, logging a failure.
func (e *Engine) releaseLease(ctx context.Context, runID, owner string) {
	if err := e.queue.ReleaseLease(ctx, runID, owner); err != nil && runstream.ErrorCodeOf(err) != runstream.CodeConflict {
		e.logger.Warn("release lease", "run_id", runID, "error", err)
	}
}
