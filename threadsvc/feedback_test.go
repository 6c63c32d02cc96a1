package threadsvc_test

import (
	"encoding/json"
	"testing"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/contracts"
	"github.com/runstream/runstream/eventlog"
	"github.com/runstream/runstream/live"
	"github.com/runstream/runstream/memory"
	"github.com/runstream/runstream/runevents"
	"github.com/runstream/runstream/threadsvc"
)

// The feedback lists and stats of a run hold every user's feedback (an
// import keeps other users' ratings of a run), once the caller may see
// the run; a caller who may not is told the run does not exist.
func TestRunFeedbackListsEveryUsers(t *testing.T) {
	t.Parallel()
	validator, err := contracts.NewValidator()
	if err != nil {
		t.Fatal(err)
	}
	events, runs := memory.NewRunEventStore(), memory.NewRunStore()
	svc := threadsvc.New(events, events, runs, eventlog.NewThreadLog(events, validator, live.New(live.Config{}), eventlog.ThreadLimits{}), nil, threadsvc.Config{})
	ctx := t.Context()
	if _, err := runs.PutRun(ctx, runevents.ThreadRun{ThreadID: "t1", RunID: "r1", OwnerID: "alice", Status: runevents.RunSuccess}); err != nil {
		t.Fatal(err)
	}
	mine, err := svc.PutFeedback(ctx, runevents.Feedback{ThreadID: "t1", RunID: "r1", UserID: "alice", Rating: json.RawMessage(`1`)})
	if err != nil {
		t.Fatal(err)
	}
	// carol's rating, as an import stores it.
	theirs, err := runs.PutFeedback(ctx, runevents.Feedback{ThreadID: "t1", RunID: "r1", UserID: "carol", Rating: json.RawMessage(`-1`)})
	if err != nil {
		t.Fatal(err)
	}
	for name, list := range map[string]func() ([]runevents.Feedback, error){
		"ThreadRunFeedback": func() ([]runevents.Feedback, error) { return svc.ThreadRunFeedback(ctx, "alice", "t1", "r1") },
		"RunFeedback":       func() ([]runevents.Feedback, error) { return svc.RunFeedback(ctx, "alice", "r1") },
	} {
		got, err := list()
		if err != nil || len(got) != 2 || got[0].ID != mine.ID || got[1].ID != theirs.ID {
			t.Errorf("%s = %+v, %v; want alice's then carol's", name, got, err)
		}
	}
	stats, err := svc.RunFeedbackStats(ctx, "alice", "t1", "r1")
	if err != nil || stats != (threadsvc.FeedbackStats{RunID: "r1", Total: 2, Positive: 1, Negative: 1}) {
		t.Errorf("stats = %+v, %v", stats, err)
	}
	// alice deletes only her own; carol's is not hers to delete.
	if err := svc.DeleteFeedbackByID(ctx, "alice", "t1", "r1", theirs.ID); runstream.ErrorCodeOf(err) != runstream.CodeNotFound {
		t.Errorf("alice deletes carol's feedback: %v, want NOT_FOUND", err)
	}
	// bob sees none of it: the thread's run lists and counts nothing, as
	// for a run nobody has (the original looks up no run there); the
	// stateless route finds no run of his.
	if got, err := svc.ThreadRunFeedback(ctx, "bob", "t1", "r1"); err != nil || len(got) != 0 {
		t.Errorf("bob's ThreadRunFeedback: %+v, %v; want none", got, err)
	}
	if got, err := svc.RunFeedbackStats(ctx, "bob", "t1", "r1"); err != nil || got != (threadsvc.FeedbackStats{RunID: "r1"}) {
		t.Errorf("bob's RunFeedbackStats: %+v, %v; want zeros", got, err)
	}
	if _, err := svc.RunFeedback(ctx, "bob", "r1"); runstream.ErrorCodeOf(err) != runstream.CodeNotFound || runstream.AsError(err).Message != "Run r1 not found" {
		t.Errorf("bob's RunFeedback: %v, want NOT_FOUND \"Run r1 not found\"", err)
	}
}
