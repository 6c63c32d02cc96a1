package workflowtest

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/workflow"
)

// step is one event appended in a status test and the status it leaves.
type step struct {
	e    workflow.NewEvent
	want workflow.RunStatus
}

var appendTests = []test{
	{"Status", func(t *testing.T, s workflow.Store) {
		running := workflow.StatusRunning
		cases := []struct {
			name  string
			steps []step
			// output and errorObj are the Output and Error the run ends with.
			output, errorObj string
		}{
			{"completed", []step{
				{runEvent(workflow.EventRunStarted, `{"startedAt":"now"}`), running},
				{nodeEvent(workflow.EventNodeQueued, "n1", ""), running},
				{nodeEvent(workflow.EventNodeStarted, "n1", `{"attempt":1}`), running},
				{nodeEvent(workflow.EventNodeProgress, "n1", `{"percent":50}`), running},
				{nodeEvent(workflow.EventNodeOutputDelta, "n1", `{"channel":"text","delta":"hi"}`), running},
				{nodeEvent(workflow.EventNodeToolStarted, "n1", `{"toolCallId":"c1"}`), running},
				{nodeEvent(workflow.EventNodeToolFinished, "n1", `{"toolCallId":"c1"}`), running},
				{nodeEvent(workflow.EventArtifactCreated, "n1", `{"id":"a1"}`), running},
				{nodeEvent(workflow.EventNodeCompleted, "n1", `{"durationMs":3}`), running},
				{runEvent(workflow.EventRunCompleted, `{"output":{"answer":[42,"x"]},"artifacts":[]}`), workflow.StatusCompleted},
			}, `{"answer":[42,"x"]}`, ""},
			{"failed", []step{
				{runEvent(workflow.EventRunStarted, ""), running},
				{nodeEvent(workflow.EventNodeFailed, "n1", `{"error":{"code":"X"},"willRetry":true}`), running},
				{runEvent(workflow.EventRunFailed, `{"error":{"code":"WORKFLOW_NODE_FAILED","message":"boom","retryable":false},"failedNodeId":"n1"}`), workflow.StatusFailed},
			}, "", `{"code":"WORKFLOW_NODE_FAILED","message":"boom","retryable":false}`},
			{"paused, resumed, started again", []step{
				{runEvent(workflow.EventRunStarted, ""), running},
				{nodeEvent(workflow.EventRunAwaitingInput, "ask", `{"actions":["ok"]}`), workflow.StatusAwaitingInput},
				{nodeEvent(workflow.EventRunResumed, "ask", `{"action":"ok"}`), running},
				{runEvent(workflow.EventRunQueued, ""), workflow.StatusQueued},
				{runEvent(workflow.EventRunStarted, ""), running},
				{runEvent(workflow.EventRunCompleted, `{"output":null}`), workflow.StatusCompleted},
			}, "null", ""},
			{"cancelled while running", []step{
				{runEvent(workflow.EventRunStarted, ""), running},
				{runEvent(workflow.EventRunCancelRequested, `{"requestedBy":"alice"}`), workflow.StatusCancelling},
				{nodeEvent(workflow.EventNodeFailed, "n1", `{}`), workflow.StatusCancelling},
				{runEvent(workflow.EventRunCancelled, ""), workflow.StatusCancelled},
			}, "", ""},
			{"cancelled while queued", []step{
				{runEvent(workflow.EventRunCancelRequested, ""), workflow.StatusCancelling},
				{runEvent(workflow.EventRunCancelled, ""), workflow.StatusCancelled},
			}, "", ""},
			{"failed without error", []step{
				{runEvent(workflow.EventRunFailed, ""), workflow.StatusFailed},
			}, "", ""},
		}
		zone := time.FixedZone("", 8*3600)
		for _, c := range cases {
			run := newRun(t, s, nil)
			want := run
			for i, st := range c.steps {
				st.e.Timestamp = base.Add(time.Duration(i+1) * time.Minute).In(zone)
				// Fenced by the lease until the run ends.
				envs := appendEvents(t, s, workflow.AppendParams{RunID: run.ID, Events: []workflow.NewEvent{st.e}, LeaseOwner: lessee})
				want.Status, want.LastSeq, want.UpdatedAt = st.want, int64(i+3), st.e.Timestamp
				if st.e.Event == workflow.EventRunStarted && want.StartedAt.IsZero() {
					want.StartedAt = st.e.Timestamp
				}
				if st.e.Event.Terminal() {
					want.FinishedAt, want.LeaseOwner, want.LeaseExpiresAt = st.e.Timestamp, "", time.Time{}
					want.Output, want.Error = jsonOrNil(c.output), jsonOrNil(c.errorObj)
				}
				if envs[0].Seq != want.LastSeq {
					t.Errorf("%s step %d (%s): seq %d, want %d", c.name, i, st.e.Event, envs[0].Seq, want.LastSeq)
				}
				sameRun(t, c.name+" after "+string(st.e.Event), getRun(t, s, run.ID), want)
			}
		}
	}},
	{"SeqContinuity", func(t *testing.T, s workflow.Store) {
		run := newRun(t, s, nil)
		want := allEvents(t, s, run.ID)
		n := 0
		for size := 1; size <= 5; size++ {
			batch := make([]workflow.NewEvent, size)
			for i := range batch {
				batch[i] = progress(n)
				n++
			}
			envs := appendEvents(t, s, workflow.AppendParams{RunID: run.ID, Events: batch})
			last := int64(len(want))
			if got := seqsOf(envs); !slices.Equal(got, span(last+1, last+int64(size))) {
				t.Errorf("batch of %d after seq %d: seqs %v, want %v", size, last, got, span(last+1, last+int64(size)))
			}
			want = append(want, envs...)
		}
		sameEnvelopes(t, "ListEvents after the batches", allEvents(t, s, run.ID), want)
		if got := getRun(t, s, run.ID).LastSeq; got != int64(len(want)) {
			t.Errorf("LastSeq %d, want %d", got, len(want))
		}
	}},
	{"TerminalRefuses", func(t *testing.T, s workflow.Store) {
		for _, end := range []workflow.EventType{workflow.EventRunCompleted, workflow.EventRunFailed, workflow.EventRunCancelled} {
			run := newRun(t, s, nil)
			appendEvents(t, s, workflow.AppendParams{RunID: run.ID, Events: []workflow.NewEvent{runEvent(workflow.EventRunStarted, ""), runEvent(end, "")}})
			run, events := getRun(t, s, run.ID), allEvents(t, s, run.ID)
			tries := []workflow.AppendParams{
				{RunID: run.ID, Events: []workflow.NewEvent{progress(1)}},
				{RunID: run.ID, Events: []workflow.NewEvent{runEvent(workflow.EventRunStarted, "")}},
				{RunID: run.ID, Events: []workflow.NewEvent{runEvent(workflow.EventRunCompleted, "")}},
				{RunID: run.ID, Events: []workflow.NewEvent{runEvent(workflow.EventRunFailed, "")}},
				{RunID: run.ID, Events: []workflow.NewEvent{runEvent(workflow.EventRunCancelled, "")}},
				{RunID: run.ID, Events: []workflow.NewEvent{progress(2)}, LeaseOwner: lessee},
				{RunID: run.ID, Events: []workflow.NewEvent{nodeEvent(workflow.EventArtifactCreated, "n1", "")}, Artifacts: []workflow.Artifact{{ID: "late", NodeID: "n1"}}},
			}
			for _, p := range tries {
				_, err := s.Append(t.Context(), p)
				wantCode(t, err, runstream.CodeConflict, "Append of "+string(p.Events[0].Event)+" after "+string(end))
			}
			unchanged(t, s, "after appends to a "+string(end)+" run", run, events)
			_, err := s.GetArtifact(t.Context(), run.ID, "late")
			wantCode(t, err, runstream.CodeNotFound, "artifact of a refused append")
		}
	}},
	{"InvalidBatch", func(t *testing.T, s workflow.Store) {
		run := newRun(t, s, nil)
		events := allEvents(t, s, run.ID)
		withData := func(data string) workflow.NewEvent {
			e := progress(0)
			e.Data = json.RawMessage(data)
			return e
		}
		cases := []struct {
			name string
			p    workflow.AppendParams
		}{
			{"empty batch", workflow.AppendParams{}},
			{"unknown event", workflow.AppendParams{Events: []workflow.NewEvent{progress(1), runEvent("run.paused", "")}}},
			{"node event without node id", workflow.AppendParams{Events: []workflow.NewEvent{progress(1), runEvent(workflow.EventNodeStarted, "")}}},
			{"array data", workflow.AppendParams{Events: []workflow.NewEvent{progress(1), withData(`[1]`)}}},
			{"string data", workflow.AppendParams{Events: []workflow.NewEvent{progress(1), withData(`"x"`)}}},
			{"null data", workflow.AppendParams{Events: []workflow.NewEvent{progress(1), withData(`null`)}}},
			{"broken data", workflow.AppendParams{Events: []workflow.NewEvent{progress(1), withData(`{"a":`)}}},
			{"terminal not last", workflow.AppendParams{Events: []workflow.NewEvent{runEvent(workflow.EventRunCompleted, ""), progress(1)}}},
			{"token without hash", workflow.AppendParams{Events: []workflow.NewEvent{nodeEvent(workflow.EventRunAwaitingInput, "ask", "")},
				ResumeToken: &workflow.ResumeToken{NodeID: "ask", ExpiresAt: base}}},
			{"token without expiry", workflow.AppendParams{Events: []workflow.NewEvent{nodeEvent(workflow.EventRunAwaitingInput, "ask", "")},
				ResumeToken: &workflow.ResumeToken{NodeID: "ask", Hash: hashOf("t")}}},
			{"artifact without id", workflow.AppendParams{Events: []workflow.NewEvent{nodeEvent(workflow.EventArtifactCreated, "n1", "")},
				Artifacts: []workflow.Artifact{{NodeID: "n1", Name: "a"}}}},
			{"artifact id twice", workflow.AppendParams{Events: []workflow.NewEvent{nodeEvent(workflow.EventArtifactCreated, "n1", "")},
				Artifacts: []workflow.Artifact{{ID: "twice"}, {ID: "twice"}}}},
			{"unknown status condition", workflow.AppendParams{Events: []workflow.NewEvent{progress(1)}, IfStatus: "paused"}},
		}
		for _, c := range cases {
			c.p.RunID = run.ID
			_, err := s.Append(t.Context(), c.p)
			wantCode(t, err, runstream.CodeInvalidArgument, c.name)
		}
		unchanged(t, s, "after invalid batches", run, events)
		_, err := s.PendingResumeToken(t.Context(), run.ID)
		wantCode(t, err, runstream.CodeWorkflowResumeTokenInvalid, "PendingResumeToken after invalid batches")
		_, err = s.GetArtifact(t.Context(), run.ID, "twice")
		wantCode(t, err, runstream.CodeNotFound, "artifact of an invalid batch")
	}},
	{"Lease", func(t *testing.T, s workflow.Store) {
		run := newRun(t, s, nil)
		free := newRun(t, s, func(r *workflow.Run) { r.LeaseOwner, r.LeaseExpiresAt = "", time.Time{} })
		for _, c := range []struct {
			name  string
			run   workflow.Run
			owner string
		}{
			{"another lessee", run, "worker-2"},
			{"a run without lease", free, lessee},
		} {
			events := allEvents(t, s, c.run.ID)
			_, err := s.Append(t.Context(), workflow.AppendParams{
				RunID: c.run.ID, LeaseOwner: c.owner,
				Events:      []workflow.NewEvent{nodeEvent(workflow.EventArtifactCreated, "n1", ""), nodeEvent(workflow.EventRunAwaitingInput, "ask", "")},
				Artifacts:   []workflow.Artifact{{ID: "fenced", NodeID: "n1"}},
				ResumeToken: &workflow.ResumeToken{NodeID: "ask", Hash: hashOf("fenced"), ExpiresAt: base.Add(time.Hour)},
			})
			wantCode(t, err, runstream.CodeConflict, c.name)
			unchanged(t, s, c.name, c.run, events)
			_, err = s.GetArtifact(t.Context(), c.run.ID, "fenced")
			wantCode(t, err, runstream.CodeNotFound, c.name+": artifact of the fenced batch")
			_, err = s.PendingResumeToken(t.Context(), c.run.ID)
			wantCode(t, err, runstream.CodeWorkflowResumeTokenInvalid, c.name+": token of the fenced batch")
		}
		if got := seqsOf(appendEvents(t, s, workflow.AppendParams{RunID: run.ID, LeaseOwner: lessee, Events: []workflow.NewEvent{progress(1)}})); got[0] != 3 {
			t.Errorf("append by the lessee: seq %v, want [3]", got)
		}
		if got := seqsOf(appendEvents(t, s, workflow.AppendParams{RunID: run.ID, Events: []workflow.NewEvent{progress(2)}})); got[0] != 4 {
			t.Errorf("unfenced append: seq %v, want [4]", got)
		}
		if r := getRun(t, s, run.ID); r.LeaseOwner != lessee || !r.LeaseExpiresAt.Equal(run.LeaseExpiresAt) {
			t.Errorf("lease after appends: %q until %s, want %q until %s", r.LeaseOwner, r.LeaseExpiresAt, lessee, run.LeaseExpiresAt)
		}
	}},
	{"IfStatus", func(t *testing.T, s workflow.Store) {
		run := newRun(t, s, nil) // queued
		events := allEvents(t, s, run.ID)
		cancel := runEvent(workflow.EventRunCancelRequested, `{"requestedBy":"u1"}`)
		_, err := s.Append(t.Context(), workflow.AppendParams{RunID: run.ID, IfStatus: workflow.StatusRunning, Events: []workflow.NewEvent{cancel}})
		wantCode(t, err, runstream.CodeConflict, "Append if running to a queued run")
		unchanged(t, s, "after an append whose status condition failed", run, events)
		appendEvents(t, s, workflow.AppendParams{RunID: run.ID, IfStatus: workflow.StatusQueued, Events: []workflow.NewEvent{cancel}})
		run, events = getRun(t, s, run.ID), allEvents(t, s, run.ID)
		if run.Status != workflow.StatusCancelling {
			t.Fatalf("status after run.cancel_requested if queued: %s, want cancelling", run.Status)
		}
		// The second of two callers that both read "queued".
		_, err = s.Append(t.Context(), workflow.AppendParams{RunID: run.ID, IfStatus: workflow.StatusQueued, Events: []workflow.NewEvent{cancel}})
		wantCode(t, err, runstream.CodeConflict, "Append if queued to a cancelling run")
		unchanged(t, s, "after the second conditional append", run, events)
	}},
	{"UnknownRun", func(t *testing.T, s workflow.Store) {
		_, err := s.Append(t.Context(), workflow.AppendParams{RunID: newID("run"), Events: []workflow.NewEvent{progress(1)}})
		wantCode(t, err, runstream.CodeWorkflowRunNotFound, "Append to an unknown run")
		// The id is the caller's: a not-found answer quotes an excerpt of it.
		long := strings.Repeat("w", 300)
		_, err = s.GetRun(t.Context(), long, asAlice)
		wantCode(t, err, runstream.CodeWorkflowRunNotFound, "GetRun of an unknown long id")
		if strings.Contains(err.Error(), long[:100]) {
			t.Errorf("GetRun of an unknown %d-byte id: %q holds it whole", len(long), err)
		}
		_, err = s.GetWorkflow(t.Context(), long, asAlice)
		wantCode(t, err, runstream.CodeWorkflowNotFound, "GetWorkflow of an unknown long id")
		if strings.Contains(err.Error(), long[:100]) {
			t.Errorf("GetWorkflow of an unknown %d-byte id: %q holds it whole", len(long), err)
		}
	}},
}

func jsonOrNil(s string) json.RawMessage {
	if s == "" {
		return nil
	}
	return json.RawMessage(s)
}
