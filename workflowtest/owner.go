package workflowtest

import (
	"strings"
	"testing"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/workflow"
)

var ownerTests = []test{
	{"ForeignIsMissing", func(t *testing.T, s workflow.Store) {
		w, v := newWorkflow(t, s, alice)
		run := pausedRun(t, s)
		events := allEvents(t, s, run.ID)
		ctx := t.Context()
		cases := []struct {
			name    string
			foreign string // an id of alice's, which bob does not see
			unknown string // an id of no row
			code    runstream.ErrorCode
			call    func(id string) error
		}{
			{"GetWorkflow", w.ID, newID("wf"), runstream.CodeWorkflowNotFound, func(id string) error {
				_, err := s.GetWorkflow(ctx, id, asBob)
				return err
			}},
			{"GetVersion", w.ID, newID("wf"), runstream.CodeWorkflowNotFound, func(id string) error {
				_, err := s.GetVersion(ctx, id, v.ID, asBob)
				return err
			}},
			{"AddVersion", w.ID, newID("wf"), runstream.CodeWorkflowNotFound, func(id string) error {
				_, err := s.AddVersion(ctx, workflow.Version{ID: newID("wv"), WorkflowID: id}, asBob)
				return err
			}},
			{"CreateRun", w.ID, newID("wf"), runstream.CodeWorkflowNotFound, func(id string) error {
				r := workflow.Run{ID: newID("run"), WorkflowID: id, VersionID: v.ID, OwnerID: bob}
				_, _, err := s.CreateRun(ctx, r, initialEvents())
				return err
			}},
			{"GetRun", run.ID, newID("run"), runstream.CodeWorkflowRunNotFound, func(id string) error {
				_, err := s.GetRun(ctx, id, asBob)
				return err
			}},
			{"Resume", run.ID, newID("run"), runstream.CodeWorkflowRunNotFound, func(id string) error {
				p := resumeParams(id, "secret")
				p.Owner = asBob
				_, err := s.Resume(ctx, p)
				return err
			}},
			{"ListWorkflows cursor", w.ID, newID("wf"), runstream.CodeInvalidArgument, func(id string) error {
				_, err := s.ListWorkflows(ctx, workflow.ListWorkflowsParams{Owner: asBob, BeforeID: id, Limit: 10})
				return err
			}},
			{"ListRuns cursor", run.ID, newID("run"), runstream.CodeInvalidArgument, func(id string) error {
				_, err := s.ListRuns(ctx, workflow.ListRunsParams{Owner: asBob, BeforeID: id, Limit: 10})
				return err
			}},
		}
		for _, c := range cases {
			foreign, unknown := c.call(c.foreign), c.call(c.unknown)
			wantCode(t, foreign, c.code, c.name+" of another owner's id")
			wantCode(t, unknown, c.code, c.name+" of an unknown id")
			if foreign == nil || unknown == nil {
				continue
			}
			// Up to the id, another owner's row answers exactly as no row.
			if f, u := withoutID(foreign, c.foreign), withoutID(unknown, c.unknown); f != u {
				t.Errorf("%s: another owner's id answers %q, an unknown id %q; want the same", c.name, f, u)
			}
		}
		unchanged(t, s, "run after bob's calls", run, events)
		sameWorkflow(t, "workflow after bob's calls", mustWorkflow(t, s, w.ID, asAlice), w)
	}},
}

// withoutID is the message of err with id replaced by a placeholder.
func withoutID(err error, id string) string {
	return strings.ReplaceAll(err.Error(), id, "<id>")
}
