package workflowtest

import (
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/workflow"
)

// pause makes run await input at node "ask" with a token that expires at
// base+1h, and returns the token as stored.
func pause(t *testing.T, s workflow.Store, runID, secret string) workflow.ResumeToken {
	t.Helper()
	tok := workflow.ResumeToken{
		NodeID: "ask", NodeRunID: "ask-r1", Hash: hashOf(secret),
		Actions: []string{"approve", "reject"}, FormSchema: json.RawMessage(`{"type":"object"}`),
		ExpiresAt: base.Add(time.Hour),
	}
	appendEvents(t, s, workflow.AppendParams{RunID: runID, ResumeToken: &tok, Events: []workflow.NewEvent{
		nodeEvent(workflow.EventRunAwaitingInput, "ask", `{"actions":["approve","reject"],"resumeToken":"`+secret+`"}`),
	}})
	tok.RunID = runID
	return tok
}

// pausedRun returns a started run of alice that awaits input with the
// token "secret".
func pausedRun(t *testing.T, s workflow.Store) workflow.Run {
	t.Helper()
	run := newRun(t, s, nil)
	appendEvents(t, s, workflow.AppendParams{RunID: run.ID, Events: []workflow.NewEvent{runEvent(workflow.EventRunStarted, "")}})
	pause(t, s, run.ID, "secret")
	return getRun(t, s, run.ID)
}

// resumeParams resumes runID as alice with the token secret, before the
// token expires.
func resumeParams(runID, secret string) workflow.ResumeParams {
	return workflow.ResumeParams{
		RunID: runID, Owner: asAlice, Hash: hashOf(secret), Now: base.Add(time.Minute),
		Events: []workflow.NewEvent{nodeEvent(workflow.EventRunResumed, "ask", `{"action":"approve"}`)},
	}
}

func resume(t *testing.T, s workflow.Store, p workflow.ResumeParams) []workflow.Envelope {
	t.Helper()
	envs, err := s.Resume(t.Context(), p)
	if err != nil {
		t.Fatalf("Resume(%s): %v", p.RunID, err)
	}
	return envs
}

// The token is judged before the run: a wrong token fails with
// CodeWorkflowResumeTokenInvalid, a used one with Used, an expired one with
// Expired, and only a usable token on a run that does not await input with
// CodeWorkflowRunNotAwaitingInput. A refused resume consumes nothing and
// appends nothing.
var resumeTests = []test{
	{"Success", func(t *testing.T, s workflow.Store) {
		run := pausedRun(t, s)
		envs := resume(t, s, resumeParams(run.ID, "secret"))
		if len(envs) != 1 || envs[0].Seq != run.LastSeq+1 || envs[0].Event != workflow.EventRunResumed || envs[0].NodeID != "ask" {
			t.Fatalf("Resume returned %+v, want run.resumed of node ask at seq %d", envs, run.LastSeq+1)
		}
		if got := allEvents(t, s, run.ID); len(got) != int(run.LastSeq)+1 {
			t.Errorf("%d events after resume, want %d", len(got), run.LastSeq+1)
		} else {
			sameEnvelope(t, "stored run.resumed", got[len(got)-1], envs[0])
		}
		if got := getRun(t, s, run.ID); got.Status != workflow.StatusRunning || got.LastSeq != run.LastSeq+1 {
			t.Errorf("after resume: status %s, LastSeq %d; want running, %d", got.Status, got.LastSeq, run.LastSeq+1)
		}
		_, err := s.PendingResumeToken(t.Context(), run.ID)
		wantCode(t, err, runstream.CodeWorkflowResumeTokenInvalid, "PendingResumeToken after resume")
		// Further events follow the resume's seq.
		next := appendEvents(t, s, workflow.AppendParams{RunID: run.ID, Events: []workflow.NewEvent{progress(1)}})
		if next[0].Seq != run.LastSeq+2 {
			t.Errorf("append after resume: seq %d, want %d", next[0].Seq, run.LastSeq+2)
		}
	}},
	{"Used", func(t *testing.T, s workflow.Store) {
		run := pausedRun(t, s)
		resume(t, s, resumeParams(run.ID, "secret"))
		run, events := getRun(t, s, run.ID), allEvents(t, s, run.ID)
		_, err := s.Resume(t.Context(), resumeParams(run.ID, "secret"))
		wantCode(t, err, runstream.CodeWorkflowResumeTokenUsed, "second resume with the token")
		unchanged(t, s, "after the second resume", run, events)
		// A used token stays used when the run pauses again with a new one.
		pause(t, s, run.ID, "second")
		run, events = getRun(t, s, run.ID), allEvents(t, s, run.ID)
		_, err = s.Resume(t.Context(), resumeParams(run.ID, "secret"))
		wantCode(t, err, runstream.CodeWorkflowResumeTokenUsed, "first token after the run paused again")
		unchanged(t, s, "after the first token again", run, events)
		resume(t, s, resumeParams(run.ID, "second"))
	}},
	{"WrongToken", func(t *testing.T, s workflow.Store) {
		run := pausedRun(t, s)
		other := newRun(t, s, nil)
		pause(t, s, other.ID, "other")
		events := allEvents(t, s, run.ID)
		pending, err := s.PendingResumeToken(t.Context(), run.ID)
		if err != nil {
			t.Fatalf("PendingResumeToken: %v", err)
		}
		cases := []struct {
			name string
			hash []byte
		}{
			{"wrong token", hashOf("guess")},
			{"no hash", nil},
			{"a prefix of the hash", hashOf("secret")[:16]},
			{"the hash with a byte more", append(hashOf("secret"), 0)},
			{"the token of another run", hashOf("other")},
		}
		for _, c := range cases {
			p := resumeParams(run.ID, "secret")
			p.Hash = c.hash
			_, err := s.Resume(t.Context(), p)
			wantCode(t, err, runstream.CodeWorkflowResumeTokenInvalid, c.name)
		}
		unchanged(t, s, "after wrong tokens", run, events)
		got, err := s.PendingResumeToken(t.Context(), run.ID)
		if err != nil {
			t.Fatalf("PendingResumeToken after wrong tokens: %v", err)
		}
		sameToken(t, "pending token after wrong tokens", got, pending)
		resume(t, s, resumeParams(run.ID, "secret"))
	}},
	{"Expired", func(t *testing.T, s workflow.Store) {
		run := pausedRun(t, s)
		events := allEvents(t, s, run.ID)
		pending, err := s.PendingResumeToken(t.Context(), run.ID)
		if err != nil {
			t.Fatalf("PendingResumeToken: %v", err)
		}
		for _, now := range []time.Time{pending.ExpiresAt, pending.ExpiresAt.Add(time.Microsecond), pending.ExpiresAt.Add(48 * time.Hour)} {
			p := resumeParams(run.ID, "secret")
			p.Now = now
			_, err := s.Resume(t.Context(), p)
			wantCode(t, err, runstream.CodeWorkflowResumeTokenExpired, "resume at "+now.String())
		}
		unchanged(t, s, "after expired resumes", run, events)
		got, err := s.PendingResumeToken(t.Context(), run.ID)
		if err != nil {
			t.Fatalf("PendingResumeToken of an expired token: %v", err)
		}
		sameToken(t, "expired pending token", got, pending)
		p := resumeParams(run.ID, "secret")
		p.Now = pending.ExpiresAt.Add(-time.Microsecond)
		resume(t, s, p)
	}},
	{"NotAwaitingInput", func(t *testing.T, s workflow.Store) {
		run := pausedRun(t, s)
		appendEvents(t, s, workflow.AppendParams{RunID: run.ID, Events: []workflow.NewEvent{runEvent(workflow.EventRunCancelRequested, "")}})
		run, events := getRun(t, s, run.ID), allEvents(t, s, run.ID)
		_, err := s.Resume(t.Context(), resumeParams(run.ID, "secret"))
		wantCode(t, err, runstream.CodeWorkflowRunNotAwaitingInput, "resume of a cancelling run")
		unchanged(t, s, "after resuming a cancelling run", run, events)
		if _, err := s.PendingResumeToken(t.Context(), run.ID); err != nil {
			t.Errorf("PendingResumeToken after a refused resume: %v", err)
		}
		appendEvents(t, s, workflow.AppendParams{RunID: run.ID, Events: []workflow.NewEvent{runEvent(workflow.EventRunCancelled, "")}})
		_, err = s.Resume(t.Context(), resumeParams(run.ID, "secret"))
		wantCode(t, err, runstream.CodeWorkflowRunAlreadyTerminal, "resume of a cancelled run")
	}},
	{"Replaced", func(t *testing.T, s workflow.Store) {
		run := pausedRun(t, s)
		second := pause(t, s, run.ID, "second")
		got, err := s.PendingResumeToken(t.Context(), run.ID)
		if err != nil {
			t.Fatalf("PendingResumeToken: %v", err)
		}
		sameToken(t, "pending token after a new one", got, second)
		_, err = s.Resume(t.Context(), resumeParams(run.ID, "secret"))
		wantCode(t, err, runstream.CodeWorkflowResumeTokenInvalid, "resume with the replaced token")
		resume(t, s, resumeParams(run.ID, "second"))
	}},
	{"Refused", func(t *testing.T, s workflow.Store) {
		run := pausedRun(t, s)
		events := allEvents(t, s, run.ID)
		edit := func(f func(*workflow.ResumeParams)) workflow.ResumeParams {
			p := resumeParams(run.ID, "secret")
			f(&p)
			return p
		}
		cases := []struct {
			name string
			p    workflow.ResumeParams
			code runstream.ErrorCode
		}{
			{"another owner", edit(func(p *workflow.ResumeParams) { p.Owner = asBob }), runstream.CodeWorkflowRunNotFound},
			{"unknown run", edit(func(p *workflow.ResumeParams) { p.RunID = newID("run") }), runstream.CodeWorkflowRunNotFound},
			{"zero owner", edit(func(p *workflow.ResumeParams) { p.Owner = runstream.Owner{} }), runstream.CodeInvalidArgument},
			{"zero time", edit(func(p *workflow.ResumeParams) { p.Now = time.Time{} }), runstream.CodeInvalidArgument},
			{"no events", edit(func(p *workflow.ResumeParams) { p.Events = nil }), runstream.CodeInvalidArgument},
			{"invalid event", edit(func(p *workflow.ResumeParams) { p.Events = append(p.Events, runEvent(workflow.EventNodeProgress, "")) }), runstream.CodeInvalidArgument},
		}
		for _, c := range cases {
			_, err := s.Resume(t.Context(), c.p)
			wantCode(t, err, c.code, c.name)
		}
		unchanged(t, s, "after refused resumes", run, events)
		p := resumeParams(run.ID, "secret")
		p.Owner = runstream.AnyOwner
		resume(t, s, p)
	}},
	{"Concurrent", func(t *testing.T, s workflow.Store) {
		const n = 50
		run := pausedRun(t, s)
		var wg sync.WaitGroup
		errs := make([]error, n)
		for i := range n {
			wg.Go(func() { _, errs[i] = s.Resume(t.Context(), resumeParams(run.ID, "secret")) })
		}
		wg.Wait()
		ok := 0
		for _, err := range errs {
			switch runstream.ErrorCodeOf(err) {
			case "":
				ok++
			case runstream.CodeWorkflowResumeTokenUsed, runstream.CodeWorkflowRunNotAwaitingInput:
			default:
				t.Errorf("concurrent resume: %v, want success, %s or %s", err, runstream.CodeWorkflowResumeTokenUsed, runstream.CodeWorkflowRunNotAwaitingInput)
			}
		}
		if ok != 1 {
			t.Errorf("%d of %d concurrent resumes succeeded, want exactly 1", ok, n)
		}
		events := allEvents(t, s, run.ID)
		resumed := 0
		for _, e := range events {
			if e.Event == workflow.EventRunResumed {
				resumed++
			}
		}
		if resumed != 1 || len(events) != int(run.LastSeq)+1 {
			t.Errorf("%d run.resumed among %d events, want 1 among %d", resumed, len(events), run.LastSeq+1)
		}
	}},
	{"PendingToken", func(t *testing.T, s workflow.Store) {
		run := newRun(t, s, nil)
		_, err := s.PendingResumeToken(t.Context(), run.ID)
		wantCode(t, err, runstream.CodeWorkflowResumeTokenInvalid, "PendingResumeToken of a run never paused")
		_, err = s.PendingResumeToken(t.Context(), newID("run"))
		wantCode(t, err, runstream.CodeWorkflowRunNotFound, "PendingResumeToken of an unknown run")
		want := pause(t, s, run.ID, "secret")
		got, err := s.PendingResumeToken(t.Context(), run.ID)
		if err != nil {
			t.Fatalf("PendingResumeToken: %v", err)
		}
		sameToken(t, "PendingResumeToken", got, want)
	}},
}
