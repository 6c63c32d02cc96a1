package engine

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/tracing"
	"github.com/runstream/runstream/workflow"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// The trace of a run: each execution of the run by an engine (from its
// claim to its end, its yield or its loss) is a span, "workflow.run", and
// each node attempt within it a child span, "workflow.node <type>". The
// execution's parent is the span of the work of this process that queued
// or resumed the run (NotifyContext: the HTTP request that started it, so
// request and run are one trace); an execution with none (the run was
// queued by another instance, or taken over after a crash) is the root of
// a trace of its own, found by its runstream.run.id. An execution that
// follows one of this engine that yielded (the run parked awaiting input)
// or was lost links to it.

// Bounds of the parents an engine remembers for runs it has not claimed
// yet: a run claimed by another instance leaves its parent behind until
// it is older than maxParentAge.
const (
	maxRunParents = 4096
	maxParentAge  = 10 * time.Minute
)

// runParents holds, by run id, the span of the work that queued or resumed
// a run, until the engine claims the run. Its zero value is ready.
type runParents struct {
	mu sync.Mutex
	m  map[string]runParent
}

type runParent struct {
	sc trace.SpanContext
	at time.Time
}

// put remembers sc as the parent of runID's next execution, unless the run
// has one already (the request that queued it comes before the one that
// cancels it). When full, it forgets parents older than maxParentAge, and
// then remembers nothing more until there is room.
func (p *runParents) put(runID string, sc trace.SpanContext, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.m[runID]; ok {
		return
	}
	if p.m == nil {
		p.m = map[string]runParent{}
	}
	if len(p.m) >= maxRunParents {
		for id, e := range p.m {
			if now.Sub(e.at) > maxParentAge {
				delete(p.m, id)
			}
		}
		if len(p.m) >= maxRunParents {
			return
		}
	}
	p.m[runID] = runParent{sc: sc, at: now}
}

// take returns and forgets the parent of runID's execution, if any.
func (p *runParents) take(runID string) trace.SpanContext {
	p.mu.Lock()
	defer p.mu.Unlock()
	e := p.m[runID]
	delete(p.m, runID)
	return e.sc
}

// NotifyContext is Notify for a run queued, resumed or asked to cancel by
// the work of ctx (an HTTP request): the span of ctx, when there is one,
// becomes the parent of the run's next execution by this engine, so that
// the request and the run it started are one trace.
func (e *Engine) NotifyContext(ctx context.Context, runID string) {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		e.parents.put(runID, sc, time.Now())
	}
	e.Notify(runID)
}

// startRunSpan starts the span of one execution of run, under ctx.
func (e *Engine) startRunSpan(ctx context.Context, run workflow.Run) (context.Context, trace.Span) {
	opts := []trace.SpanStartOption{
		trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(
			attribute.String("runstream.run.id", run.ID),
			attribute.String("runstream.workflow.id", run.WorkflowID),
			attribute.String("runstream.workflow.version_id", run.VersionID),
			attribute.String("runstream.worker.id", e.cfg.WorkerID),
			attribute.String("runstream.run.claimed_status", string(run.Status)),
		),
	}
	if prev := e.previous.take(run.ID); prev.IsValid() {
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: prev,
			Attributes: []attribute.KeyValue{attribute.String("runstream.link", "previous_execution")}}))
	}
	if parent := e.parents.take(run.ID); parent.IsValid() {
		ctx = trace.ContextWithRemoteSpanContext(ctx, parent)
	} else {
		opts = append(opts, trace.WithNewRoot())
	}
	return tracing.Tracer().Start(ctx, "workflow.run", opts...)
}

// rememberExecution keeps the span of an execution of runID that ended as
// end for the run's next execution to link to, when the run goes on: it
// yielded or was lost.
func (e *Engine) rememberExecution(runID string, span trace.Span, end outcome) {
	if sc := span.SpanContext(); sc.IsValid() && (end == yielded || end == lost) {
		e.previous.put(runID, sc, time.Now())
	}
}

// endRunSpan ends the span of an execution that ended as end.
func endRunSpan(span trace.Span, end outcome) {
	name := [...]string{running: "running", ended: "ended", yielded: "yielded", lost: "lost"}[end]
	span.SetAttributes(attribute.String("runstream.run.outcome", name))
	if end == lost {
		span.SetStatus(codes.Error, "the run was left: its lease expires and it is claimed again")
	}
	span.End()
}

// setRunStatus records on span the terminal status the event end wrote.
func setRunStatus(span trace.Span, end workflow.EventType) {
	status := strings.TrimPrefix(string(end), "run.")
	span.SetAttributes(attribute.String("runstream.run.status", status))
	if end == workflow.EventRunFailed {
		span.SetStatus(codes.Error, "the run failed")
	}
}

// startAttemptSpan starts the span of node attempt n, a child of the run's
// span in ctx.
func startAttemptSpan(ctx context.Context, nodeType string, n *NodeRun) (context.Context, trace.Span) {
	return tracing.Tracer().Start(ctx, "workflow.node "+nodeType, trace.WithAttributes(
		attribute.String("runstream.run.id", n.RunID),
		attribute.String("runstream.node.id", n.NodeID),
		attribute.String("runstream.node.type", nodeType),
		attribute.String("runstream.node_run.id", n.NodeRunID),
		attribute.Int("runstream.node.attempt", n.Attempt),
	))
}

// endAttemptSpan ends the span of a node attempt that ended with status
// (completed, failed, awaiting_input, stopped); a failed one records its
// error code and whether the node is retried.
func endAttemptSpan(span trace.Span, status string, err *runstream.Error, willRetry bool) {
	span.SetAttributes(attribute.String("runstream.node.status", status))
	if err != nil {
		span.SetAttributes(attribute.String("runstream.error.code", string(err.Code)), attribute.Bool("runstream.node.will_retry", willRetry))
		span.SetStatus(codes.Error, string(err.Code))
	}
	span.End()
}
