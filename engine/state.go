package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/workflow"
)

// nodeState is what a run's stored events say about one node, for an
// engine that (re)starts executing the run.
type nodeState struct {
	queued    bool // node.queued was written
	attempt   int  // the latest attempt started, 0 before the first
	nodeRunID string
	startedAt time.Time
	// open: the latest attempt has neither node.completed nor node.failed
	// (it was interrupted, or it awaits input).
	open bool
	// completed: node.completed was written for the latest attempt.
	completed bool
	// willRetry and failed: the latest attempt's node.failed said another
	// attempt follows, or not (then lastError is its error object).
	willRetry bool
	failed    bool
	lastError json.RawMessage
	// shutdown: the latest attempt was interrupted by a graceful
	// shutdown; shutdowns counts the node's attempts that were.
	shutdown  bool
	shutdowns int
}

// replayNodes folds a run's events into node states.
func replayNodes(events []workflow.Envelope) (map[string]*nodeState, error) {
	states := map[string]*nodeState{}
	for _, env := range events {
		if env.NodeID == "" {
			continue
		}
		st := states[env.NodeID]
		if st == nil {
			st = &nodeState{}
			states[env.NodeID] = st
		}
		switch env.Event {
		case workflow.EventNodeQueued:
			st.queued = true
		case workflow.EventNodeStarted:
			var d nodeStartedData
			if err := json.Unmarshal(env.Data, &d); err != nil {
				return nil, fmt.Errorf("replay seq %d: %w", env.Seq, err)
			}
			*st = nodeState{queued: true, attempt: d.Attempt, nodeRunID: env.NodeRunID, startedAt: env.Timestamp, open: true, shutdowns: st.shutdowns}
		case workflow.EventNodeCompleted:
			st.open, st.completed = false, true
		case workflow.EventNodeFailed:
			var d struct {
				Error     json.RawMessage `json:"error"`
				WillRetry bool            `json:"willRetry"`
			}
			var e struct {
				Code    runstream.ErrorCode `json:"code"`
				Details struct {
					Reason string `json:"reason"`
				} `json:"details"`
			}
			if err := json.Unmarshal(env.Data, &d); err != nil {
				return nil, fmt.Errorf("replay seq %d: %w", env.Seq, err)
			}
			if len(d.Error) > 0 {
				if err := json.Unmarshal(d.Error, &e); err != nil {
					return nil, fmt.Errorf("replay seq %d: error: %w", env.Seq, err)
				}
			}
			st.open, st.willRetry, st.failed, st.lastError = false, d.WillRetry, !d.WillRetry, d.Error
			st.shutdown = e.Code == runstream.CodeWorkflowWorkerLost && e.Details.Reason == ShutdownReason
			if st.shutdown {
				st.shutdowns++
			}
		}
	}
	return states, nil
}

// startSpec says how a node starts: with which attempt, after which wait,
// and how many of its earlier attempts a graceful shutdown interrupted.
type startSpec struct {
	attempt   int
	wait      time.Duration
	shutdowns int
}

// load reads the run's definition, events and stored node outputs.
func (r *runner) load(ctx context.Context) ([]workflow.Envelope, map[string]json.RawMessage, error) {
	v, err := r.e.store.GetVersion(ctx, r.run.WorkflowID, r.run.VersionID, runstream.AnyOwner)
	if err != nil {
		return nil, nil, fmt.Errorf("load version: %w", err)
	}
	plan, err := r.e.registry.CompileJSON(v.Definition)
	if err != nil {
		r.planErr = runstream.AsError(err)
	}
	r.plan = plan
	var events []workflow.Envelope
	for {
		page, err := r.e.store.ListEvents(ctx, r.run.ID, int64(len(events)), workflow.MaxEventPageLimit)
		if err != nil {
			return nil, nil, fmt.Errorf("load events: %w", err)
		}
		events = append(events, page...)
		if len(page) < workflow.MaxEventPageLimit {
			break
		}
	}
	outputs, err := r.e.outputs.NodeOutputs(ctx, r.run.ID)
	if err != nil {
		return nil, nil, fmt.Errorf("load node outputs: %w", err)
	}
	return events, outputs, nil
}

// reconcile brings the stored state of a run up to date before its nodes
// are scheduled: a node with a stored output is done (a human_input node
// resumed since gets its node.completed now); an interrupted attempt
// fails with WORKFLOW_WORKER_LOST and is retried when its policy allows;
// an attempt a graceful shutdown interrupted starts again at once, without
// counting against the policy when the node is repeatable (spareAttempts);
// a node whose last attempt failed for good fails the run. It returns the
// nodes that restart with a later attempt, or end when the run ended.
func (r *runner) reconcile(states map[string]*nodeState, outputs map[string]json.RawMessage) (map[string]startSpec, outcome) {
	restart := map[string]startSpec{}
	for _, id := range r.plan.order {
		pn := r.plan.nodes[id]
		st := states[id]
		if st == nil {
			continue
		}
		if out, ok := outputs[id]; ok {
			r.outputs[id] = out
			if !st.completed {
				data := nodeCompletedData{OutputSummary: Summary(out), DurationMs: max(r.e.now().Sub(st.startedAt).Milliseconds(), 0), Attempt: max(st.attempt, 1)}
				if err := r.em.emit(r.ctx, workflow.AppendParams{}, nodeEvent(workflow.EventNodeCompleted, id, st.nodeRunID, data)); err != nil {
					return nil, lost
				}
			}
			continue
		}
		spare := pn.spareAttempts(st.shutdowns)
		switch {
		case st.open:
			lostErr := runstream.Errorf(runstream.CodeWorkflowWorkerLost, "the instance running node %s stopped during attempt %d", id, st.attempt).WithNode(id)
			willRetry := st.attempt < pn.maxAttempts+spare
			data := nodeFailedData{Error: newErrorObject(lostErr), Attempt: st.attempt, WillRetry: willRetry}
			if err := r.em.emit(r.ctx, workflow.AppendParams{}, nodeEvent(workflow.EventNodeFailed, id, st.nodeRunID, data)); err != nil {
				return nil, lost
			}
			if !willRetry {
				return nil, r.failRun(id, mustJSON(newErrorObject(lostErr)))
			}
			r.e.cfg.Observer.NodeRetried(pn.spec.Type)
			restart[id] = startSpec{attempt: st.attempt + 1, wait: pn.backoffAfter(st.attempt - spare), shutdowns: st.shutdowns}
		case st.failed:
			return nil, r.failRun(id, st.lastError)
		case st.willRetry && st.shutdown:
			restart[id] = startSpec{attempt: st.attempt + 1, shutdowns: st.shutdowns}
		case st.willRetry:
			restart[id] = startSpec{attempt: st.attempt + 1, wait: pn.backoffAfter(st.attempt - spare), shutdowns: st.shutdowns}
		}
	}
	return restart, running
}
