package workflowsvc

import (
	"context"
	"encoding/json"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/live"
	"github.com/runstream/runstream/sse"
	"github.com/runstream/runstream/streams"
	"github.com/runstream/runstream/workflow"
)

// RunStream is one follower's view of a run's events: the run as it was
// when the stream opened, its hub subscription, and its stored events as
// SSE frames.
type RunStream struct {
	store Store
	hub   *live.Hub
	run   workflow.Run
}

// OpenRunStream reads the user's run for a follower. Openings for the same
// run and user that arrive while a read is in flight share it, so that
// the followers of a run reconnecting at once (after a restart, say) make
// one store read rather than one each. An opening stops waiting when ctx
// ends. Every shared read ends before its openings subscribe, so the run's
// LastSeq is one the store held before they subscribe, as Subscribe needs.
func (s *Service) OpenRunStream(ctx context.Context, user, runID string) (*RunStream, error) {
	read := s.runReads.DoChan(runID+"\x00"+user, func() (any, error) {
		// Not cancelled with the first opening: the others wait on it.
		return s.store.GetRun(context.WithoutCancel(ctx), runID, runstream.OwnedBy(user))
	})
	select {
	case res := <-read:
		if res.Err != nil {
			return nil, res.Err
		}
		return &RunStream{store: s.store, hub: s.hub, run: res.Val.(workflow.Run)}, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Run returns the run as the stream found it.
func (st *RunStream) Run() workflow.Run { return st.run }

// Subscribe subscribes to the run's live events. Every event up to the
// run's LastSeq is stored (the HTTP API refuses a cursor past it).
func (st *RunStream) Subscribe(int64) *live.Subscription {
	return st.hub.Subscribe(streams.WorkflowStreamKey(st.run.ID), st.run.LastSeq)
}

// Shows is true: every event of the run's stream belongs to it.
func (st *RunStream) Shows(live.Event) bool { return true }

// Kind is the stream's kind for metrics (ssestream.Source).
func (st *RunStream) Kind() string { return streams.KindWorkflow }

// Dense is true: a run's seqs have no gaps, so a live event past the
// cursor's successor makes the follower read the store.
func (st *RunStream) Dense() bool { return true }

// ReadAfter appends to buf the frames of up to limit stored events after
// seq after, and returns them with their count, the last seq read and
// whether the last is terminal.
func (st *RunStream) ReadAfter(ctx context.Context, buf []byte, after int64, limit int) ([]byte, int, int64, bool, error) {
	events, err := st.store.ListEvents(ctx, st.run.ID, after, limit)
	if err != nil || len(events) == 0 {
		return buf, 0, after, false, err
	}
	for _, env := range events {
		if buf, err = streams.AppendWorkflowFrame(buf, env); err != nil {
			return buf, 0, after, false, err
		}
	}
	last := events[len(events)-1]
	return buf, len(events), last.Seq, last.Event.Terminal(), nil
}

// End reports the stream over when the run is terminal: at once (done)
// when the cursor is at or past its stored terminal event, else, with
// more, when events after the cursor remain to be read, or after one
// synthesised terminal frame (data.synthesised true, no id line, never
// stored) for a run that is terminal without a terminal event.
func (st *RunStream) End(ctx context.Context, cursor int64) (frame []byte, done, more bool, err error) {
	run, err := st.store.GetRun(ctx, st.run.ID, runstream.AnyOwner)
	if err != nil {
		return nil, false, false, err
	}
	if !run.Status.Terminal() {
		return nil, false, false, nil
	}
	if run.LastSeq > cursor {
		return nil, false, true, nil
	}
	if run.LastSeq > 0 {
		last, err := st.store.ListEvents(ctx, run.ID, run.LastSeq-1, 1)
		if err != nil {
			return nil, false, false, err
		}
		if len(last) == 1 && last[0].Event.Terminal() {
			return nil, true, false, nil
		}
	}
	var artifacts []workflow.ArtifactRef
	if run.Status == workflow.StatusCompleted {
		if artifacts, err = st.announcedArtifacts(ctx); err != nil {
			return nil, false, false, err
		}
	}
	frame, err = synthesisedTerminal(run, artifacts)
	return frame, true, false, err
}

// announcedArtifacts reads the run's events for the artifacts they
// announce, which a synthesised run.completed lists as the engine's would.
func (st *RunStream) announcedArtifacts(ctx context.Context) ([]workflow.ArtifactRef, error) {
	var refs []workflow.ArtifactRef
	for after := int64(0); ; {
		events, err := st.store.ListEvents(ctx, st.run.ID, after, workflow.MaxEventPageLimit)
		if err != nil {
			return nil, err
		}
		page, err := workflow.AnnouncedArtifacts(events)
		if err != nil {
			return nil, err
		}
		refs = append(refs, page...)
		if len(events) < workflow.MaxEventPageLimit {
			return refs, nil // the last page: no read past it
		}
		after = events[len(events)-1].Seq
	}
}

// synthesisedTerminal renders the terminal frame of a run that is terminal
// without a terminal event; a completed run's lists artifacts.
func synthesisedTerminal(run workflow.Run, artifacts []workflow.ArtifactRef) ([]byte, error) {
	event, _ := workflow.TerminalEventFor(run.Status)
	finished := run.FinishedAt
	if finished.IsZero() {
		finished = run.UpdatedAt
	}
	data := map[string]any{"synthesised": true, "finishedAt": finished.Format(workflow.TimestampLayout)}
	switch event {
	case workflow.EventRunCompleted:
		data["output"] = orNull(run.Output)
		data["artifacts"] = workflow.CompletedArtifacts(artifacts)
	case workflow.EventRunFailed:
		errObj := run.Error
		if len(errObj) == 0 {
			errObj, _ = json.Marshal(map[string]any{
				"code":      runstream.CodeWorkflowWorkerLost,
				"message":   "the run ended without a terminal event",
				"retryable": runstream.CodeWorkflowWorkerLost.Retryable(),
			})
		}
		data["error"] = errObj
		data["failedNodeId"] = failedNodeID(errObj)
	}
	raw, err := json.Marshal(data)
	if err != nil {
		return nil, err
	}
	// The seq a terminal event would have taken: seqs in a stream only
	// increase, and a client that drops what is at or below the last seq
	// it applied (a replay after a reconnect) still takes this frame. No
	// event ever takes it: the run is terminal.
	env := workflow.Envelope{
		SchemaVersion: workflow.SchemaVersion, RunID: run.ID, WorkflowID: run.WorkflowID, VersionID: run.VersionID,
		Seq: run.LastSeq + 1, Event: event, Timestamp: finished, Data: raw,
	}
	envJSON, err := env.AppendJSON(nil)
	if err != nil {
		return nil, err
	}
	// No ID: a client that resumes after it keeps the last stored seq.
	return sse.AppendFrame(nil, sse.Frame{Event: string(event), Data: envJSON})
}

// failedNodeID is run.failed's failedNodeId for a run's stored error:
// the node the error names (its nodeId), or nil for an error of the run
// itself. With the stores of this repository a run has a stored error
// only once its run.failed event is stored, so no synthesised frame
// carries one; this keeps a store that sets the two apart (a
// hand-mended row, another implementation) answering as the engine does.
func failedNodeID(errObj json.RawMessage) any {
	var e struct {
		NodeID string `json:"nodeId"`
	}
	if json.Unmarshal(errObj, &e) != nil || e.NodeID == "" {
		return nil
	}
	return e.NodeID
}

func orNull(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return json.RawMessage("null")
	}
	return raw
}
