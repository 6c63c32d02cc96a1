package workflowtest

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/workflow"
)

// idTests check that every store takes ids of workflow.MaxIDBytes and
// refuses longer ones, so an id one backend stores every backend stores.
var idTests = []test{
	{"LengthLimit", func(t *testing.T, s workflow.Store) {
		long := func(prefix string, n int) string { return prefix + strings.Repeat("x", n-len(prefix)) }
		ctx := t.Context()
		w := workflow.Workflow{ID: long(newID("wf"), workflow.MaxIDBytes), OwnerID: alice}
		v := workflow.Version{ID: long(newID("wv"), workflow.MaxIDBytes), Definition: json.RawMessage(`{}`)}
		if _, _, err := s.CreateWorkflow(ctx, w, v); err != nil {
			t.Fatalf("CreateWorkflow with %d-byte ids: %v", workflow.MaxIDBytes, err)
		}
		for name, call := range map[string]func() error{
			"CreateWorkflow id": func() error {
				_, _, err := s.CreateWorkflow(ctx, workflow.Workflow{ID: long(newID("wf"), workflow.MaxIDBytes+1), OwnerID: alice},
					workflow.Version{ID: newID("wv"), Definition: json.RawMessage(`{}`)})
				return err
			},
			"CreateWorkflow owner": func() error {
				_, _, err := s.CreateWorkflow(ctx, workflow.Workflow{ID: newID("wf"), OwnerID: long(alice, workflow.MaxIDBytes+1)},
					workflow.Version{ID: newID("wv"), Definition: json.RawMessage(`{}`)})
				return err
			},
			"AddVersion id": func() error {
				_, err := s.AddVersion(ctx, workflow.Version{ID: long(newID("wv"), workflow.MaxIDBytes+1), WorkflowID: w.ID, Definition: json.RawMessage(`{}`)}, asAlice)
				return err
			},
			"CreateRun id": func() error {
				_, _, err := s.CreateRun(ctx, workflow.Run{ID: long(newID("run"), workflow.MaxIDBytes+1), WorkflowID: w.ID, VersionID: v.ID, OwnerID: alice}, initialEvents())
				return err
			},
		} {
			if code := runstream.ErrorCodeOf(call()); code != runstream.CodeInvalidArgument {
				t.Errorf("%s of %d bytes: code %q, want %s", name, workflow.MaxIDBytes+1, code, runstream.CodeInvalidArgument)
			}
		}
		r, _, err := s.CreateRun(ctx, workflow.Run{ID: long(newID("run"), workflow.MaxIDBytes), WorkflowID: w.ID, VersionID: v.ID, OwnerID: alice}, initialEvents())
		if err != nil {
			t.Fatalf("CreateRun with a %d-byte id: %v", workflow.MaxIDBytes, err)
		}
		if _, err := s.GetRun(ctx, r.ID, asAlice); err != nil {
			t.Errorf("GetRun of the %d-byte id: %v", workflow.MaxIDBytes, err)
		}
	}},
}
