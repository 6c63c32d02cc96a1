package workflowtest

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/workflow"
)

var workflowTests = []test{
	{"Create", func(t *testing.T, s workflow.Store) {
		w := workflow.Workflow{ID: newID("wf"), OwnerID: alice, Name: "n", Description: "d", LatestVersionID: "ignored"}
		v := workflow.Version{ID: newID("wv"), WorkflowID: "ignored", Number: 7, Definition: json.RawMessage(`{"b":1,"a":[2]}`)}
		before := time.Now()
		gw, gv, err := s.CreateWorkflow(t.Context(), w, v)
		after := time.Now()
		if err != nil {
			t.Fatalf("CreateWorkflow: %v", err)
		}
		checkDefaultTime(t, "workflow CreatedAt", gw.CreatedAt, before, after)
		checkDefaultTime(t, "version CreatedAt", gv.CreatedAt, before, after)
		if !gw.UpdatedAt.Equal(gw.CreatedAt) {
			t.Errorf("UpdatedAt %s, want CreatedAt %s", gw.UpdatedAt, gw.CreatedAt)
		}
		w.LatestVersionID, w.CreatedAt, w.UpdatedAt = v.ID, gw.CreatedAt, gw.CreatedAt
		v.WorkflowID, v.Number, v.CreatedAt = w.ID, 1, gv.CreatedAt
		sameWorkflow(t, "CreateWorkflow returned", gw, w)
		sameVersion(t, "CreateWorkflow returned", gv, v)
		got, err := s.GetWorkflow(t.Context(), w.ID, asAlice)
		if err != nil {
			t.Fatalf("GetWorkflow: %v", err)
		}
		sameWorkflow(t, "GetWorkflow", got, w)
		gotV, err := s.GetVersion(t.Context(), w.ID, v.ID, asAlice)
		if err != nil {
			t.Fatalf("GetVersion: %v", err)
		}
		sameVersion(t, "GetVersion", gotV, v)
	}},
	{"CreateKeepsGivenTimes", func(t *testing.T, s workflow.Store) {
		w := workflow.Workflow{ID: newID("wf"), OwnerID: alice, CreatedAt: base.Add(123456789), UpdatedAt: base.Add(time.Hour)}
		v := workflow.Version{ID: newID("wv"), CreatedAt: base.Add(2 * time.Second)}
		gw, gv, err := s.CreateWorkflow(t.Context(), w, v)
		if err != nil {
			t.Fatalf("CreateWorkflow: %v", err)
		}
		want := base.Add(123456 * time.Microsecond)
		for _, got := range []time.Time{gw.CreatedAt, mustWorkflow(t, s, w.ID, asAlice).CreatedAt} {
			if !got.Equal(want) {
				t.Errorf("CreatedAt %s, want the given one truncated to microseconds %s", got, want)
			}
		}
		if !gw.UpdatedAt.Equal(w.UpdatedAt) || !gv.CreatedAt.Equal(v.CreatedAt) {
			t.Errorf("UpdatedAt %s and version CreatedAt %s, want %s and %s", gw.UpdatedAt, gv.CreatedAt, w.UpdatedAt, v.CreatedAt)
		}
	}},
	{"CreateDuplicate", func(t *testing.T, s workflow.Store) {
		w, v := newWorkflow(t, s, alice)
		_, _, err := s.CreateWorkflow(t.Context(), workflow.Workflow{ID: w.ID, OwnerID: bob, Name: "other"}, workflow.Version{ID: newID("wv")})
		wantCode(t, err, runstream.CodeConflict, "CreateWorkflow with a used workflow id")
		sameWorkflow(t, "the first workflow after the conflict", mustWorkflow(t, s, w.ID, runstream.AnyOwner), w)

		other := workflow.Workflow{ID: newID("wf"), OwnerID: alice}
		_, _, err = s.CreateWorkflow(t.Context(), other, workflow.Version{ID: v.ID})
		wantCode(t, err, runstream.CodeConflict, "CreateWorkflow with a used version id")
		_, err = s.GetWorkflow(t.Context(), other.ID, runstream.AnyOwner)
		wantCode(t, err, runstream.CodeWorkflowNotFound, "GetWorkflow of the refused workflow")
		got, err := s.GetVersion(t.Context(), w.ID, v.ID, asAlice)
		if err != nil {
			t.Fatalf("GetVersion: %v", err)
		}
		sameVersion(t, "the first version after the conflict", got, v)
	}},
	{"CreateInvalid", func(t *testing.T, s workflow.Store) {
		cases := []struct {
			name string
			w    workflow.Workflow
			v    workflow.Version
		}{
			{"no workflow id", workflow.Workflow{OwnerID: alice}, workflow.Version{ID: newID("wv")}},
			{"no owner", workflow.Workflow{ID: newID("wf")}, workflow.Version{ID: newID("wv")}},
			{"no version id", workflow.Workflow{ID: newID("wf"), OwnerID: alice}, workflow.Version{}},
		}
		for _, c := range cases {
			_, _, err := s.CreateWorkflow(t.Context(), c.w, c.v)
			wantCode(t, err, runstream.CodeInvalidArgument, c.name)
		}
		got, err := s.ListWorkflows(t.Context(), workflow.ListWorkflowsParams{Owner: runstream.AnyOwner, Limit: 10})
		if err != nil || len(got) != 0 {
			t.Errorf("ListWorkflows after refused creates: %d workflows, %v; want none", len(got), err)
		}
	}},
	{"Versions", func(t *testing.T, s workflow.Store) {
		w, v1 := newWorkflow(t, s, alice)
		want := []workflow.Version{v1}
		for i := 2; i <= 4; i++ {
			v := workflow.Version{ID: newID("wv"), WorkflowID: w.ID, Number: 99, Definition: json.RawMessage(fmt.Sprintf(`{"rev":%d}`, i))}
			if i == 3 {
				v.CreatedAt = base.Add(time.Minute)
			}
			before := time.Now()
			got, err := s.AddVersion(t.Context(), v, asAlice)
			after := time.Now()
			if err != nil {
				t.Fatalf("AddVersion %d: %v", i, err)
			}
			if i == 3 {
				if !got.CreatedAt.Equal(v.CreatedAt) {
					t.Errorf("version %d CreatedAt %s, want the given %s", i, got.CreatedAt, v.CreatedAt)
				}
			} else {
				checkDefaultTime(t, "version CreatedAt", got.CreatedAt, before, after)
			}
			v.Number, v.CreatedAt = i, got.CreatedAt
			sameVersion(t, "AddVersion returned", got, v)
			want = append(want, v)
			gw := mustWorkflow(t, s, w.ID, asAlice)
			if gw.LatestVersionID != v.ID || !gw.UpdatedAt.Equal(v.CreatedAt) {
				t.Errorf("after version %d: LatestVersionID %s, UpdatedAt %s; want %s and the version's CreatedAt %s", i, gw.LatestVersionID, gw.UpdatedAt, v.ID, v.CreatedAt)
			}
			if !gw.CreatedAt.Equal(w.CreatedAt) {
				t.Errorf("after version %d: workflow CreatedAt %s, want %s", i, gw.CreatedAt, w.CreatedAt)
			}
		}
		for _, v := range want {
			got, err := s.GetVersion(t.Context(), w.ID, v.ID, asAlice)
			if err != nil {
				t.Fatalf("GetVersion(%s): %v", v.ID, err)
			}
			sameVersion(t, "GetVersion after later versions", got, v)
		}
	}},
	{"AddVersionRefused", func(t *testing.T, s workflow.Store) {
		w, v1 := newWorkflow(t, s, alice)
		cases := []struct {
			name  string
			v     workflow.Version
			owner runstream.Owner
			code  runstream.ErrorCode
		}{
			{"another owner's workflow", workflow.Version{ID: newID("wv"), WorkflowID: w.ID}, asBob, runstream.CodeWorkflowNotFound},
			{"unknown workflow", workflow.Version{ID: newID("wv"), WorkflowID: newID("wf")}, asAlice, runstream.CodeWorkflowNotFound},
			{"used version id", workflow.Version{ID: v1.ID, WorkflowID: w.ID}, asAlice, runstream.CodeConflict},
			{"no version id", workflow.Version{WorkflowID: w.ID}, asAlice, runstream.CodeInvalidArgument},
			{"zero owner", workflow.Version{ID: newID("wv"), WorkflowID: w.ID}, runstream.Owner{}, runstream.CodeInvalidArgument},
		}
		for _, c := range cases {
			_, err := s.AddVersion(t.Context(), c.v, c.owner)
			wantCode(t, err, c.code, c.name)
			if c.v.ID != v1.ID && c.v.ID != "" {
				_, err := s.GetVersion(t.Context(), w.ID, c.v.ID, runstream.AnyOwner)
				wantCode(t, err, runstream.CodeWorkflowVersionNotFound, c.name+": GetVersion of the refused version")
			}
		}
		sameWorkflow(t, "workflow after refused versions", mustWorkflow(t, s, w.ID, asAlice), w)
		v2, err := s.AddVersion(t.Context(), workflow.Version{ID: newID("wv"), WorkflowID: w.ID}, runstream.AnyOwner)
		if err != nil || v2.Number != 2 {
			t.Errorf("AddVersion as AnyOwner after refused versions: number %d, %v; want 2", v2.Number, err)
		}
	}},
	{"NotFound", func(t *testing.T, s workflow.Store) {
		w, v := newWorkflow(t, s, alice)
		w2, v2 := newWorkflow(t, s, alice)
		_, err := s.GetWorkflow(t.Context(), newID("wf"), runstream.AnyOwner)
		wantCode(t, err, runstream.CodeWorkflowNotFound, "GetWorkflow of an unknown id")
		_, err = s.GetWorkflow(t.Context(), w.ID, asBob)
		wantCode(t, err, runstream.CodeWorkflowNotFound, "GetWorkflow of another owner's workflow")
		_, err = s.GetVersion(t.Context(), w.ID, v.ID, asBob)
		wantCode(t, err, runstream.CodeWorkflowNotFound, "GetVersion of another owner's workflow")
		_, err = s.GetVersion(t.Context(), newID("wf"), v.ID, runstream.AnyOwner)
		wantCode(t, err, runstream.CodeWorkflowNotFound, "GetVersion of an unknown workflow")
		_, err = s.GetVersion(t.Context(), w.ID, newID("wv"), asAlice)
		wantCode(t, err, runstream.CodeWorkflowVersionNotFound, "GetVersion of an unknown version")
		_, err = s.GetVersion(t.Context(), w.ID, v2.ID, asAlice)
		wantCode(t, err, runstream.CodeWorkflowVersionNotFound, "GetVersion of another workflow's version")
		_, err = s.GetVersion(t.Context(), w2.ID, v.ID, runstream.AnyOwner)
		wantCode(t, err, runstream.CodeWorkflowVersionNotFound, "GetVersion of another workflow's version as AnyOwner")
		sameWorkflow(t, "GetWorkflow as AnyOwner", mustWorkflow(t, s, w.ID, runstream.AnyOwner), w)
	}},
	{"ZeroOwner", func(t *testing.T, s workflow.Store) {
		w, v := newWorkflow(t, s, alice)
		var zero runstream.Owner
		_, err := s.GetWorkflow(t.Context(), w.ID, zero)
		wantCode(t, err, runstream.CodeInvalidArgument, "GetWorkflow")
		_, err = s.GetVersion(t.Context(), w.ID, v.ID, zero)
		wantCode(t, err, runstream.CodeInvalidArgument, "GetVersion")
		_, err = s.ListWorkflows(t.Context(), workflow.ListWorkflowsParams{Limit: 10})
		wantCode(t, err, runstream.CodeInvalidArgument, "ListWorkflows")
	}},
	{"ListPaging", func(t *testing.T, s workflow.Store) {
		// 25 workflows of alice whose CreatedAt ties in threes, so that the
		// order falls back to the id, and 5 of bob in between.
		var mine, all []workflow.Workflow
		for i := range 30 {
			owner := alice
			if i%6 == 5 {
				owner = bob
			}
			w := workflow.Workflow{ID: newID("wf"), OwnerID: owner, CreatedAt: base.Add(time.Duration(i/3) * time.Second)}
			if i%2 == 1 { // ids that do not follow CreatedAt
				w.CreatedAt = w.CreatedAt.Add(-time.Hour)
			}
			gw, _, err := s.CreateWorkflow(t.Context(), w, workflow.Version{ID: newID("wv")})
			if err != nil {
				t.Fatalf("CreateWorkflow: %v", err)
			}
			all = append(all, gw)
			if owner == alice {
				mine = append(mine, gw)
			}
		}
		newestFirst(mine)
		newestFirst(all)
		for _, limit := range []int{1, 7, 25, 1000} {
			pageWorkflows(t, s, asAlice, limit, mine)
		}
		pageWorkflows(t, s, runstream.AnyOwner, 7, all)
		got, err := s.ListWorkflows(t.Context(), workflow.ListWorkflowsParams{Owner: asBob, Limit: 1000})
		if err != nil || len(got) != 5 {
			t.Errorf("ListWorkflows as bob: %d workflows, %v; want 5", len(got), err)
		}
	}},
	{"ListRefused", func(t *testing.T, s workflow.Store) {
		newWorkflow(t, s, alice)
		wb, _ := newWorkflow(t, s, bob)
		cases := []struct {
			name string
			p    workflow.ListWorkflowsParams
		}{
			{"limit 0", workflow.ListWorkflowsParams{Owner: asAlice}},
			{"limit -1", workflow.ListWorkflowsParams{Owner: asAlice, Limit: -1}},
			{"limit 1001", workflow.ListWorkflowsParams{Owner: asAlice, Limit: 1001}},
			{"unknown cursor", workflow.ListWorkflowsParams{Owner: asAlice, Limit: 10, BeforeID: newID("wf")}},
			{"another owner's workflow as cursor", workflow.ListWorkflowsParams{Owner: asAlice, Limit: 10, BeforeID: wb.ID}},
		}
		for _, c := range cases {
			_, err := s.ListWorkflows(t.Context(), c.p)
			wantCode(t, err, runstream.CodeInvalidArgument, c.name)
		}
		got, err := s.ListWorkflows(t.Context(), workflow.ListWorkflowsParams{Owner: asAlice, Limit: 1000})
		if err != nil || len(got) != 1 {
			t.Errorf("ListWorkflows limit 1000: %d workflows, %v; want 1", len(got), err)
		}
	}},
}

func mustWorkflow(t *testing.T, s workflow.Store, id string, owner runstream.Owner) workflow.Workflow {
	t.Helper()
	w, err := s.GetWorkflow(t.Context(), id, owner)
	if err != nil {
		t.Fatalf("GetWorkflow(%s): %v", id, err)
	}
	return w
}

// newestFirst sorts workflows by CreatedAt descending, then ID descending.
func newestFirst(ws []workflow.Workflow) {
	slices.SortFunc(ws, func(a, b workflow.Workflow) int {
		if c := b.CreatedAt.Compare(a.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(b.ID, a.ID)
	})
}

// pageWorkflows lists every workflow owner sees, limit at a time, and
// checks that the pages are want in order, each workflow once.
func pageWorkflows(t *testing.T, s workflow.Store, owner runstream.Owner, limit int, want []workflow.Workflow) {
	t.Helper()
	var got []workflow.Workflow
	p := workflow.ListWorkflowsParams{Owner: owner, Limit: limit}
	for range len(want) + 2 {
		page, err := s.ListWorkflows(t.Context(), p)
		if err != nil {
			t.Fatalf("ListWorkflows(%+v): %v", p, err)
		}
		if len(page) > limit {
			t.Fatalf("ListWorkflows(limit %d) returned %d", limit, len(page))
		}
		got = append(got, page...)
		if len(page) < limit {
			break
		}
		p.BeforeID = page[len(page)-1].ID
	}
	ids := func(ws []workflow.Workflow) []string {
		out := []string{}
		for _, w := range ws {
			out = append(out, w.ID)
		}
		return out
	}
	if !slices.Equal(ids(got), ids(want)) {
		t.Errorf("paging with limit %d:\n got %v\nwant %v", limit, ids(got), ids(want))
		return
	}
	for i := range got {
		sameWorkflow(t, "listed workflow", got[i], want[i])
	}
}
