package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/workflow"
	"go.opentelemetry.io/otel/trace"
)

// outcome is how a runner's drive ends.
type outcome int

const (
	// running: not ended yet (reconcile's "go on").
	running outcome = iota
	// ended: a terminal event was written.
	ended
	// yielded: the run stopped at a safe point (parked awaiting input, or
	// the engine is stopping); its lease is released.
	yielded
	// lost: the run may not be written any more (lease lost, engine
	// abandoned, store failure); nothing is written or released.
	lost
)

// Causes of the cancellation of a run's contexts.
var (
	errCancelRequested = errors.New("the run's cancellation was requested")
	errRunFailed       = errors.New("another node of the run failed")
	errNodeTimeout     = errors.New("the node attempt timed out")
	errRunnerDone      = errors.New("the runner finished")
	errShutdown        = errors.New("the engine is shutting down")
)

// ShutdownReason is details.reason of the WORKFLOW_WORKER_LOST error of a
// node attempt interrupted by a graceful shutdown (see Engine.Stop).
const ShutdownReason = "shutdown"

// Lease upkeep, as divisors of Config.LeaseDuration.
const (
	// renewDivisor: the lease is renewed once a third of it has passed
	// since it was last renewed.
	renewDivisor = 3
	// fenceDivisor: a runner that could not renew its lease stops its run
	// (the same as when the lease is lost) a fifth of the lease before the
	// lease it last obtained expires. The margin is for its nodes to see
	// their context cancelled and return, and for clocks that differ
	// between instances, before another instance may claim the run and
	// start the same nodes.
	fenceDivisor = 5
	// storeCallDivisor: each lease renewal and read of the run is
	// abandoned after a sixth of the lease (and at the latest when the
	// runner must stop), so that a store that does not answer cannot keep
	// a runner from stopping its run in time.
	storeCallDivisor = 6
)

// runner executes one claimed run until it ends, yields or is lost.
type runner struct {
	e   *Engine
	run workflow.Run
	// owner is the lease owner of this runner's claim.
	owner string
	// leaseUntil is when the lease of this runner's claim expires, as set
	// by the claim; supervise renews it.
	leaseUntil time.Time

	// ctx is the run's writing context, cancelled (with its cause) when
	// the run must not be written any more.
	ctx         context.Context
	stopWriting context.CancelCauseFunc
	// nodesCtx, a child of ctx, is cancelled to stop the running nodes.
	nodesCtx  context.Context
	stopNodes context.CancelCauseFunc

	// span is the span of this execution of the run, in ctx.
	span       trace.Span
	em         *emitter
	poke       chan struct{}
	cancelReq  chan struct{}
	cancelOnce sync.Once

	// Owned by the execute goroutine.
	plan    *Plan
	planErr *runstream.Error
	outputs map[string]json.RawMessage
	// outputBytes is the bytes of the run's node outputs, those loaded
	// and those its attempts returned (MaxRunOutputBytes).
	outputBytes atomic.Int64
	results     chan nodeResult
	// artifacts lists the run's artifacts, for run.completed: those of its
	// stored events, then those its nodes create.
	artifacts []workflow.ArtifactRef
}

func newRunner(e *Engine, run workflow.Run, owner string, leaseUntil time.Time) *runner {
	r := &runner{e: e, run: run, owner: owner, leaseUntil: leaseUntil, poke: make(chan struct{}, 1), cancelReq: make(chan struct{}), outputs: map[string]json.RawMessage{}}
	var ctx context.Context
	ctx, r.span = e.startRunSpan(e.hardCtx, run)
	r.ctx, r.stopWriting = context.WithCancelCause(ctx)
	r.nodesCtx, r.stopNodes = context.WithCancelCause(r.ctx)
	r.em = &emitter{
		log: e.cfg.Log, runID: run.ID, owner: owner,
		window: e.cfg.DeltaWindow, maxBytes: e.cfg.DeltaMaxBytes,
		flushCtx: r.ctx,
		onHalt:   func(err error) { r.stopWriting(fmt.Errorf("write failed: %w", err)) },
	}
	return r
}

// execute drives the run, then releases its lease when it yielded.
func (r *runner) execute() {
	defer r.stopWriting(errRunnerDone)
	stopHalt := context.AfterFunc(r.ctx, func() { r.em.halt(context.Cause(r.ctx)) })
	defer stopHalt()
	supervised := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { r.supervise(supervised) })
	end := r.drive()
	r.e.rememberExecution(r.run.ID, r.span, end)
	defer endRunSpan(r.span, end)
	close(supervised)
	wg.Wait()
	switch end {
	case yielded:
		// Pending deltas first; when they cannot be written the run is
		// left as when lost: its lease expires.
		if err := r.em.emit(r.ctx, workflow.AppendParams{}); err != nil {
			r.left(fmt.Errorf("write pending deltas: %w", err))
			return
		}
		r.em.halt(errRunnerDone)
		r.e.releaseLease(r.ctx, r.run.ID, r.owner)
	case lost:
		if cause := context.Cause(r.ctx); cause != nil {
			r.left(cause)
		}
	}
}

// left logs why the run was left without a terminal event or a release,
// unless the engine abandoned its runs.
func (r *runner) left(cause error) {
	if r.e.hardCtx.Err() == nil {
		r.e.logger.WarnContext(r.ctx, "run left", "run_id", r.run.ID, "cause", cause)
	}
}

// drive brings the run from its stored state to its end or a safe point.
func (r *runner) drive() outcome {
	if r.run.Status == workflow.StatusCancelling {
		return r.cancelled()
	}
	events, outputs, err := r.load(r.ctx)
	if err != nil {
		// Keep the lease: it expires and the run is claimed again later,
		// rather than at once in a loop while the store fails.
		r.e.logger.ErrorContext(r.ctx, "load run", "run_id", r.run.ID, "error", err)
		return lost
	}
	for _, out := range outputs {
		r.outputBytes.Add(int64(len(out)))
	}
	if r.run.Status == workflow.StatusQueued {
		started := runEvent(workflow.EventRunStarted, runStartedData{StartedAt: timestamp(r.e.now()), WorkerID: r.e.cfg.WorkerID})
		if r.em.emit(r.ctx, workflow.AppendParams{}, started) != nil {
			return lost
		}
	}
	if r.planErr != nil {
		return r.failRun("", mustJSON(newErrorObject(r.planErr)))
	}
	states, err := replayNodes(events)
	if err == nil {
		r.artifacts, err = workflow.AnnouncedArtifacts(events)
	}
	if err != nil {
		r.e.logger.ErrorContext(r.ctx, "replay run", "run_id", r.run.ID, "error", err)
		return r.failRun("", mustJSON(newErrorObject(runstream.Errorf(runstream.CodeInternal, "the run's events could not be read"))))
	}
	restart, end := r.reconcile(states, outputs)
	if end != running {
		return end
	}
	return r.schedule(states, restart)
}

// nodeEnd is how a node's goroutine ended.
type nodeEnd int

const (
	nodeCompleted nodeEnd = iota
	nodeFailed            // failed for good: the run fails
	nodeYielded           // parked awaiting input, or the engine is stopping
	nodeStopped           // its context was cancelled, or writing failed
)

type nodeResult struct {
	id       string
	end      nodeEnd
	output   json.RawMessage
	artifact *workflow.ArtifactRef
	// err and retryable: the error of a node that failed for good.
	err       *runstream.Error
	retryable bool
}

// schedule runs the nodes whose needs are done, in parallel, until every
// node is done or the run fails, is cancelled, parks or yields.
func (r *runner) schedule(states map[string]*nodeState, restart map[string]startSpec) outcome {
	r.results = make(chan nodeResult, len(r.plan.order))
	started := map[string]bool{}
	inFlight := 0
	var failedID string
	var failure *runstream.Error
	var failureRetryable bool
	stopping := false
	cancelReq, drain, writing := r.cancelReq, r.e.drain, r.ctx.Done()
	for {
		if !stopping && r.nodesCtx.Err() == nil {
			for _, id := range r.plan.order {
				if started[id] || r.outputs[id] != nil || !r.needsDone(id) {
					continue
				}
				spec, ok := restart[id]
				if !ok {
					spec = startSpec{attempt: 1}
				}
				if st := states[id]; spec.attempt == 1 && (st == nil || !st.queued) {
					pn := r.plan.nodes[id]
					needs := pn.spec.Needs
					if needs == nil {
						needs = []string{}
					}
					if r.em.emit(r.ctx, workflow.AppendParams{}, nodeEvent(workflow.EventNodeQueued, id, "", nodeQueuedData{NodeType: pn.spec.Type, Needs: needs})) != nil {
						break
					}
				}
				started[id] = true
				inFlight++
				upstream := make(map[string]json.RawMessage, len(r.plan.nodes[id].upstream))
				for _, u := range r.plan.nodes[id].upstream {
					upstream[u] = r.outputs[u]
				}
				go func() { r.results <- r.runNode(id, spec, upstream) }()
			}
		}
		if inFlight == 0 {
			break
		}
		select {
		case res := <-r.results:
			inFlight--
			switch res.end {
			case nodeCompleted:
				r.outputs[res.id] = res.output
				if res.artifact != nil {
					r.artifacts = append(r.artifacts, *res.artifact)
				}
			case nodeFailed:
				if failure == nil {
					failedID, failure, failureRetryable, stopping = res.id, res.err, res.retryable, true
					r.stopNodes(errRunFailed)
				}
			case nodeYielded:
				stopping = true
			}
		case <-cancelReq: // requestCancel stopped the nodes
			cancelReq, stopping = nil, true
		case <-drain:
			drain, stopping = nil, true
		case <-writing:
			writing, stopping = nil, true
		}
	}
	switch {
	case r.ctx.Err() != nil:
		return lost
	case r.cancelRequested(): // also when the last node ended first
		return r.cancelled()
	case failure != nil:
		return r.failRun(failedID, mustJSON(nodeErrorObject(failure, failureRetryable)))
	case len(r.outputs) == len(r.plan.order):
		return r.complete()
	}
	return yielded
}

func (r *runner) needsDone(id string) bool {
	for _, need := range r.plan.nodes[id].spec.Needs {
		if r.outputs[need] == nil {
			return false
		}
	}
	return true
}

// runNode runs the attempts of a node from spec.attempt until one
// completes, the node fails for good, parks, yields or is stopped.
func (r *runner) runNode(id string, spec startSpec, upstream map[string]json.RawMessage) nodeResult {
	pn := r.plan.nodes[id]
	wait := spec.wait
	for attempt := spec.attempt; ; attempt++ {
		if wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-r.nodesCtx.Done():
				t.Stop()
				return nodeResult{id: id, end: nodeStopped}
			case <-r.e.drain:
				t.Stop()
				return nodeResult{id: id, end: nodeYielded}
			}
		}
		select {
		case <-r.e.drain:
			return nodeResult{id: id, end: nodeYielded}
		default:
		}
		if r.nodesCtx.Err() != nil {
			return nodeResult{id: id, end: nodeStopped}
		}
		n := &NodeRun{
			RunID: r.run.ID, WorkflowID: r.run.WorkflowID, NodeID: id, NodeRunID: NewID("nr"),
			Attempt: attempt, Input: r.run.Input, Outputs: maps.Clone(upstream),
			em: r.em, clock: r.e.cfg.Clock, ttl: r.e.cfg.ResumeTokenTTL, cancelRun: r.requestCancel,
			progressEvery: r.e.cfg.ProgressInterval,
		}
		begin := time.Now()
		if r.em.emit(r.ctx, workflow.AppendParams{}, nodeEvent(workflow.EventNodeStarted, id, n.NodeRunID, nodeStartedData{Attempt: attempt, InputSummary: nodeInputSummary(n.Input, n.Outputs)})) != nil {
			return nodeResult{id: id, end: nodeStopped}
		}
		actx, span := startAttemptSpan(r.nodesCtx, pn.spec.Type, n)
		out, err := r.attempt(actx, pn, n)
		if err == nil {
			err = r.reserveOutput(id, out)
		}
		r.observeAttempt(pn, begin, err)
		var art *workflow.Artifact
		if err == nil && pn.spec.Artifact != nil {
			var a workflow.Artifact
			if a, err = r.putArtifact(actx, n, pn.spec.Artifact, out); err == nil {
				art = &a
			} else {
				r.outputBytes.Add(-int64(len(out))) // not kept: this attempt failed
			}
		}
		if err == nil {
			endAttemptSpan(span, "completed", nil, false)
			data := nodeCompletedData{OutputSummary: Summary(out), DurationMs: time.Since(begin).Milliseconds(), Attempt: attempt}
			p := workflow.AppendParams{NodeOutputs: map[string]json.RawMessage{id: out}}
			events := []workflow.NewEvent{nodeEvent(workflow.EventNodeCompleted, id, n.NodeRunID, data)}
			res := nodeResult{id: id, end: nodeCompleted, output: out}
			if art != nil {
				p.Artifacts = []workflow.Artifact{*art}
				events = append([]workflow.NewEvent{artifactEvent(*art, n.NodeRunID)}, events...)
				ref := workflow.RefOf(*art)
				res.artifact = &ref
			}
			if r.em.emit(r.ctx, p, events...) != nil {
				return nodeResult{id: id, end: nodeStopped}
			}
			return res
		}
		if errors.Is(err, errParked) {
			endAttemptSpan(span, "awaiting_input", nil, false)
			return nodeResult{id: id, end: nodeYielded}
		}
		if errors.Is(context.Cause(r.nodesCtx), errShutdown) {
			return r.interrupted(pn, n, spec.shutdowns, span)
		}
		if r.nodesCtx.Err() != nil {
			endAttemptSpan(span, "stopped", nil, false)
			return nodeResult{id: id, end: nodeStopped}
		}
		nerr := r.nodeError(actx, id, err)
		retryable := retryableOf(err, nerr.Code)
		spare := pn.spareAttempts(spec.shutdowns)
		willRetry := retryable && attempt < pn.maxAttempts+spare
		endAttemptSpan(span, "failed", nerr, willRetry)
		data := nodeFailedData{Error: nodeErrorObject(nerr, retryable), Attempt: attempt, WillRetry: willRetry}
		if r.em.emit(r.ctx, workflow.AppendParams{}, nodeEvent(workflow.EventNodeFailed, id, n.NodeRunID, data)) != nil {
			return nodeResult{id: id, end: nodeStopped}
		}
		if !willRetry {
			return nodeResult{id: id, end: nodeFailed, err: nerr, retryable: retryable}
		}
		r.e.cfg.Observer.NodeRetried(pn.spec.Type)
		wait = pn.backoffAfter(attempt - spare)
	}
}

// interrupted writes the end of attempt n of node pn, interrupted by a
// graceful shutdown after shutdowns earlier ones: node.failed with a
// retryable WORKFLOW_WORKER_LOST whose details.reason is ShutdownReason.
// Another attempt follows when the node is repeatable (the interrupted
// one does not count: spareAttempts) or has attempts left; the run then
// yields, and the instance that continues it starts the next attempt at
// once (reconcile). Otherwise the node fails for good, and its run: a
// node runs twice only when its definition says it may.
func (r *runner) interrupted(pn *planNode, n *NodeRun, shutdowns int, span trace.Span) nodeResult {
	id := n.NodeID
	willRetry := n.Attempt < pn.maxAttempts+pn.spareAttempts(shutdowns+1)
	msg := "the instance running node %s shut down during attempt %d; the node starts again where the run continues"
	switch {
	case willRetry:
	case pn.repeatable:
		msg = "the instance running node %s shut down during attempt %d, and the node may not run again: shutdowns interrupted it too often"
	default:
		msg = "the instance running node %s shut down during attempt %d, and the node may not run again: it may act outside the run, and its retry policy allows no other attempt"
	}
	nerr := runstream.Errorf(runstream.CodeWorkflowWorkerLost, msg, id, n.Attempt).WithNode(id).WithDetail("reason", ShutdownReason)
	endAttemptSpan(span, "interrupted", nerr, willRetry)
	data := nodeFailedData{Error: nodeErrorObject(nerr, true), Attempt: n.Attempt, WillRetry: willRetry}
	if r.em.emit(r.ctx, workflow.AppendParams{}, nodeEvent(workflow.EventNodeFailed, id, n.NodeRunID, data)) != nil {
		return nodeResult{id: id, end: nodeStopped}
	}
	if !willRetry {
		return nodeResult{id: id, end: nodeFailed, err: nerr, retryable: true}
	}
	r.e.cfg.Observer.NodeRetried(pn.spec.Type)
	return nodeResult{id: id, end: nodeYielded}
}

// reserveOutput counts out, a node's redacted output, in the run's node
// outputs (MaxRunOutputBytes), or fails the attempt when it would take
// them past the bound.
func (r *runner) reserveOutput(id string, out json.RawMessage) error {
	if total := r.outputBytes.Add(int64(len(out))); total > int64(r.e.cfg.MaxRunOutputBytes) {
		r.outputBytes.Add(-int64(len(out)))
		return limitError(LimitRunOutputBytes, "node %s returned %d bytes of output, past the %d the run's nodes may return all together", id, len(out), r.e.cfg.MaxRunOutputBytes)
	}
	return nil
}

// observeAttempt tells the engine's observer how an attempt of pn that
// began at begin ended: err is what attempt returned.
func (r *runner) observeAttempt(pn *planNode, begin time.Time, err error) {
	outcome := "completed"
	switch {
	case errors.Is(err, errParked):
		outcome = "parked"
	case err != nil && r.nodesCtx.Err() != nil:
		outcome = "stopped"
	case err != nil:
		outcome = "failed"
	}
	r.e.cfg.Observer.NodeAttempted(pn.spec.Type, outcome, time.Since(begin))
}

// attempt calls the node's function under its timeout, with ctx (a child
// of the run's nodes' context holding the attempt's span), turning a
// panic, a timeout and an invalid output into errors.
func (r *runner) attempt(ctx context.Context, pn *planNode, n *NodeRun) (out json.RawMessage, err error) {
	if pn.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, pn.timeout, errNodeTimeout)
		defer cancel()
	}
	defer func() {
		if p := recover(); p != nil {
			r.e.logger.ErrorContext(ctx, "node panicked", "run_id", n.RunID, "node_id", n.NodeID, "panic", p, "stack", string(debug.Stack()))
			out, err = nil, runstream.Errorf(runstream.CodeWorkflowNodeFailed, "the node failed unexpectedly")
		}
	}()
	out, err = pn.run(ctx, n)
	if err != nil {
		if errors.Is(context.Cause(ctx), errNodeTimeout) && r.nodesCtx.Err() == nil {
			return nil, runstream.Errorf(runstream.CodeWorkflowNodeTimeout, "node %s did not finish within %d ms", n.NodeID, pn.timeout.Milliseconds())
		}
		return nil, err
	}
	if len(out) == 0 {
		out = json.RawMessage("null")
	}
	if len(out) > r.e.cfg.MaxOutputBytes {
		return nil, limitError(LimitOutputBytes, "node %s returned %d bytes of output, the limit is %d", n.NodeID, len(out), r.e.cfg.MaxOutputBytes)
	}
	if !json.Valid(out) {
		return nil, runstream.Errorf(runstream.CodeWorkflowNodeFailed, "node %s returned an output that is not JSON", n.NodeID)
	}
	// What is stored, passed downstream and made an artifact is the
	// redacted output.
	if out, err = RedactOutput(out); err != nil {
		return nil, runstream.Wrap(err, runstream.CodeWorkflowNodeFailed, "node %s: its output could not be redacted", n.NodeID)
	}
	return out, nil
}

// nodeError is the caller-safe error of a failed attempt, naming the node;
// an internal error is logged with ctx, the attempt's.
func (r *runner) nodeError(ctx context.Context, id string, err error) *runstream.Error {
	var re *runstream.Error
	if errors.As(err, &re) && re.Code != runstream.CodeInternal {
		out := *re
		out.NodeID, out.Err = id, nil
		return &out
	}
	r.e.logger.ErrorContext(ctx, "node failed", "run_id", r.run.ID, "node_id", id, "error", err)
	return runstream.Errorf(runstream.CodeWorkflowNodeFailed, "node %s failed", id).WithNode(id)
}

// complete writes run.completed with the run's output, or run.cancelled
// when the run's cancellation was requested meanwhile (see endRunning).
func (r *runner) complete() outcome {
	def := r.plan.def
	out := json.RawMessage("null")
	switch {
	case r.plan.output != nil:
		env, err := NewEnv(r.run.Input, r.outputs)
		if err == nil {
			out, err = r.plan.output.EvalContext(r.ctx, env)
		}
		if err != nil {
			return r.failRun("", mustJSON(newErrorObject(RenderError("output", err))))
		}
	case def.Output != "":
		out = r.outputs[def.Output]
	}
	data := runCompletedData{Output: out, Artifacts: workflow.CompletedArtifacts(r.artifacts), FinishedAt: timestamp(r.e.now())}
	end := runEvent(workflow.EventRunCompleted, data)
	if limit := workflow.EventLimit(r.e.cfg.Log.MaxEventBytes); len(end.Data) > limit {
		// Not appended: the log would refuse it, and the run would be
		// left running.
		return r.failRun("", mustJSON(newErrorObject(limitError(LimitEventBytes,
			"the run's output and artifacts take %d bytes, more than an event may hold (%d)", len(end.Data), limit))))
	}
	return r.endRunning(end)
}

// failRun writes run.failed with an error object, or run.cancelled when
// the run's cancellation was requested meanwhile (see endRunning).
func (r *runner) failRun(nodeID string, errObj json.RawMessage) outcome {
	data := runFailedData{Error: errObj, FinishedAt: timestamp(r.e.now())}
	if nodeID != "" {
		data.FailedNodeID = &nodeID
	}
	return r.endRunning(runEvent(workflow.EventRunFailed, data))
}

// endRunning appends the terminal event end only while the run's status
// is running. A cancellation requested since the runner last read the run
// made it cancelling: then end is not written, the run ends cancelled.
func (r *runner) endRunning(end workflow.NewEvent) outcome {
	err := r.em.emit(r.ctx, workflow.AppendParams{IfStatus: workflow.StatusRunning}, end)
	switch {
	case err == nil:
		setRunStatus(r.span, end.Event)
		return ended
	case errors.Is(err, errConditionFailed):
		return r.cancelled()
	}
	return lost
}

// cancelled writes run.cancelled, which only follows run.cancel_requested:
// it is appended only while the run's status is cancelling. When it cannot
// be written the run is lost.
func (r *runner) cancelled() outcome {
	end := runEvent(workflow.EventRunCancelled, runCancelledData{FinishedAt: timestamp(r.e.now())})
	if err := r.em.emit(r.ctx, workflow.AppendParams{IfStatus: workflow.StatusCancelling}, end); err != nil {
		r.stopWriting(fmt.Errorf("write run.cancelled: %w", err))
		return lost
	}
	setRunStatus(r.span, end.Event)
	return ended
}

// requestCancel stops the run's nodes at once and tells schedule, which
// starts no node more; the run then ends cancelled. It may be called from
// any goroutine, more than once.
func (r *runner) requestCancel() {
	r.cancelOnce.Do(func() {
		r.stopNodes(errCancelRequested)
		close(r.cancelReq)
	})
}

// cancelRequested reports whether requestCancel was called.
func (r *runner) cancelRequested() bool {
	select {
	case <-r.cancelReq:
		return true
	default:
		return false
	}
}

// supervise renews the lease and watches the stored run until done is
// closed: a cancellation request stops the nodes; a lost lease or a run
// ended elsewhere stops all writing. So does a lease that could not be
// renewed until a fifth of it before it expires (fenceDivisor): the
// runner stops its run rather than let another instance run its nodes at
// the same time.
func (r *runner) supervise(done <-chan struct{}) {
	lease := r.e.cfg.LeaseDuration
	margin, callTimeout := lease/fenceDivisor, lease/storeCallDivisor
	t := time.NewTicker(min(r.e.cfg.PollInterval, lease/renewDivisor))
	defer t.Stop()
	renewed := r.leaseUntil.Add(-lease)
	// fenceAt is when the runner stops the run unless it renewed the
	// lease; fence fires then (in the timers' time, as Clock may be
	// offset), in case no tick comes soon enough.
	fenceAt := r.leaseUntil.Add(-margin)
	fence := time.NewTimer(fenceAt.Sub(r.e.now()))
	defer fence.Stop()
	expired := func() bool {
		now := r.e.now()
		if now.Before(fenceAt) {
			return false
		}
		r.stopWriting(fmt.Errorf("lease expired: not renewed since %s, it expires at %s", timestamp(renewed), timestamp(fenceAt.Add(margin))))
		return true
	}
	// storeCtx bounds one store call: callTimeout, and fenceAt.
	storeCtx := func() (context.Context, context.CancelFunc) {
		return context.WithTimeout(r.ctx, min(callTimeout, fenceAt.Sub(r.e.now())))
	}
	for {
		select {
		case <-done:
			return
		case <-r.ctx.Done():
			return
		case <-t.C:
		case <-r.poke:
		case <-fence.C:
		}
		if expired() {
			return
		}
		if now := r.e.now(); now.Sub(renewed) >= lease/renewDivisor {
			ctx, cancel := storeCtx()
			err := r.e.queue.RenewLease(ctx, r.run.ID, r.owner, now.Add(lease))
			cancel()
			r.e.cfg.Observer.LeaseRenewed(err)
			switch code := runstream.ErrorCodeOf(err); {
			case err == nil:
				renewed, fenceAt = now, now.Add(lease-margin)
				fence.Reset(fenceAt.Sub(r.e.now()))
			case code == runstream.CodeConflict || code == runstream.CodeWorkflowRunNotFound:
				r.stopWriting(fmt.Errorf("lease lost: %w", err))
				return
			case r.ctx.Err() == nil:
				r.e.logger.WarnContext(r.ctx, "renew lease", "run_id", r.run.ID, "error", err)
			}
			if expired() {
				return
			}
		}
		ctx, cancel := storeCtx()
		run, err := r.e.store.GetRun(ctx, r.run.ID, runstream.AnyOwner)
		cancel()
		if err != nil {
			if r.ctx.Err() == nil {
				r.e.logger.WarnContext(r.ctx, "watch run", "run_id", r.run.ID, "error", err)
			}
			continue
		}
		switch {
		case run.Status.Terminal() || run.LeaseOwner != r.owner:
			r.stopWriting(fmt.Errorf("run %s is %s and leased to %q", run.ID, run.Status, run.LeaseOwner))
			return
		case run.Status == workflow.StatusCancelling:
			r.requestCancel()
		}
	}
}
