package workflowtest

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/workflow"
)

var listRunTests = []test{
	{"CountRuns", func(t *testing.T, s workflow.Store) {
		wa, va := newWorkflow(t, s, alice)
		wb, vb := newWorkflow(t, s, bob)
		newRunOf(t, s, wa, va, nil)
		newRunOf(t, s, wb, vb, nil) // another owner's: counted too
		running := newRunOf(t, s, wa, va, nil)
		appendEvents(t, s, workflow.AppendParams{RunID: running.ID, Events: []workflow.NewEvent{runEvent(workflow.EventRunStarted, "")}})
		done := newRunOf(t, s, wa, va, nil)
		appendEvents(t, s, workflow.AppendParams{RunID: done.ID, Events: []workflow.NewEvent{runEvent(workflow.EventRunStarted, ""), runEvent(workflow.EventRunCompleted, `{"output":1}`)}})
		got, err := s.CountRuns(t.Context(), []workflow.RunStatus{workflow.StatusQueued, workflow.StatusRunning, workflow.StatusCancelling})
		if err != nil {
			t.Fatal(err)
		}
		want := map[workflow.RunStatus]int{workflow.StatusQueued: 2, workflow.StatusRunning: 1}
		for _, st := range []workflow.RunStatus{workflow.StatusQueued, workflow.StatusRunning, workflow.StatusCancelling, workflow.StatusCompleted} {
			if got[st] != want[st] {
				t.Errorf("CountRuns: %s = %d, want %d (all: %v)", st, got[st], want[st], got)
			}
		}
	}},
	{"Filters", func(t *testing.T, s workflow.Store) {
		wa, va := newWorkflow(t, s, alice)
		wb, vb := newWorkflow(t, s, alice)
		wc, vc := newWorkflow(t, s, bob)
		at := func(i int) func(*workflow.Run) {
			return func(r *workflow.Run) { r.CreatedAt = base.Add(time.Duration(i) * time.Second) }
		}
		r1 := newRunOf(t, s, wa, va, at(1))
		r2 := newRunOf(t, s, wa, va, at(2))
		r3 := newRunOf(t, s, wa, va, at(3))
		r4 := newRunOf(t, s, wb, vb, at(4))
		r5 := newRunOf(t, s, wc, vc, at(5))
		appendEvents(t, s, workflow.AppendParams{RunID: r2.ID, Events: []workflow.NewEvent{runEvent(workflow.EventRunStarted, "")}})
		appendEvents(t, s, workflow.AppendParams{RunID: r3.ID, Events: []workflow.NewEvent{runEvent(workflow.EventRunStarted, ""), runEvent(workflow.EventRunCompleted, `{"output":1}`)}})
		r1, r2, r3 = getRun(t, s, r1.ID), getRun(t, s, r2.ID), getRun(t, s, r3.ID)

		cases := []struct {
			name string
			p    workflow.ListRunsParams
			want []workflow.Run
		}{
			{"alice", workflow.ListRunsParams{Owner: asAlice}, []workflow.Run{r4, r3, r2, r1}},
			{"bob", workflow.ListRunsParams{Owner: asBob}, []workflow.Run{r5}},
			{"any owner", workflow.ListRunsParams{Owner: runstream.AnyOwner}, []workflow.Run{r5, r4, r3, r2, r1}},
			{"workflow", workflow.ListRunsParams{Owner: asAlice, WorkflowID: wa.ID}, []workflow.Run{r3, r2, r1}},
			{"another owner's workflow", workflow.ListRunsParams{Owner: asAlice, WorkflowID: wc.ID}, nil},
			{"unknown workflow", workflow.ListRunsParams{Owner: asAlice, WorkflowID: newID("wf")}, nil},
			{"queued", workflow.ListRunsParams{Owner: asAlice, Status: workflow.StatusQueued}, []workflow.Run{r4, r1}},
			{"running", workflow.ListRunsParams{Owner: asAlice, Status: workflow.StatusRunning}, []workflow.Run{r2}},
			{"completed", workflow.ListRunsParams{Owner: runstream.AnyOwner, Status: workflow.StatusCompleted}, []workflow.Run{r3}},
			{"failed", workflow.ListRunsParams{Owner: runstream.AnyOwner, Status: workflow.StatusFailed}, nil},
			{"workflow and status", workflow.ListRunsParams{Owner: asAlice, WorkflowID: wa.ID, Status: workflow.StatusQueued}, []workflow.Run{r1}},
			{"limit", workflow.ListRunsParams{Owner: asAlice, Limit: 2}, []workflow.Run{r4, r3}},
			{"cursor", workflow.ListRunsParams{Owner: asAlice, BeforeID: r3.ID}, []workflow.Run{r2, r1}},
			{"cursor and workflow", workflow.ListRunsParams{Owner: asAlice, WorkflowID: wa.ID, BeforeID: r4.ID}, []workflow.Run{r3, r2, r1}},
			// The cursor run need not match the filters: it may have
			// changed status since the page that ended with it.
			{"cursor outside the filter", workflow.ListRunsParams{Owner: asAlice, Status: workflow.StatusQueued, BeforeID: r2.ID}, []workflow.Run{r1}},
			{"cursor at the end", workflow.ListRunsParams{Owner: asAlice, BeforeID: r1.ID}, nil},
		}
		for _, c := range cases {
			if c.p.Limit == 0 {
				c.p.Limit = 1000
			}
			got, err := s.ListRuns(t.Context(), c.p)
			if err != nil {
				t.Errorf("%s: ListRuns: %v", c.name, err)
				continue
			}
			sameRuns(t, c.name, got, c.want)
		}
	}},
	{"Paging", func(t *testing.T, s workflow.Store) {
		w, v := newWorkflow(t, s, alice)
		other, ov := newWorkflow(t, s, alice)
		wb, vb := newWorkflow(t, s, bob)
		// 25 runs of w whose CreatedAt ties in threes, so that the order
		// falls back to the id, between runs of another workflow and of bob.
		var mine, all []workflow.Run
		for i := range 35 {
			ww, vv := w, v
			switch i % 7 {
			case 3:
				ww, vv = other, ov
			case 6:
				ww, vv = wb, vb
			}
			r := newRunOf(t, s, ww, vv, func(r *workflow.Run) {
				r.CreatedAt = base.Add(time.Duration(i/3) * time.Second)
				if i%2 == 1 { // ids that do not follow CreatedAt
					r.CreatedAt = r.CreatedAt.Add(-time.Hour)
				}
			})
			all = append(all, r)
			if ww.ID == w.ID {
				mine = append(mine, r)
			}
		}
		if len(mine) != 25 {
			t.Fatalf("built %d runs of the workflow, want 25", len(mine))
		}
		runsNewestFirst(mine)
		runsNewestFirst(all)
		for _, limit := range []int{1, 7, 25, 1000} {
			pageRuns(t, s, workflow.ListRunsParams{Owner: asAlice, WorkflowID: w.ID, Limit: limit}, mine)
		}
		pageRuns(t, s, workflow.ListRunsParams{Owner: runstream.AnyOwner, Limit: 7}, all)
		pageRuns(t, s, workflow.ListRunsParams{Owner: runstream.AnyOwner, Status: workflow.StatusQueued, Limit: 7}, all)
	}},
	{"Refused", func(t *testing.T, s workflow.Store) {
		newRun(t, s, nil)
		wb, vb := newWorkflow(t, s, bob)
		rb := newRunOf(t, s, wb, vb, nil)
		cases := []struct {
			name string
			p    workflow.ListRunsParams
		}{
			{"zero owner", workflow.ListRunsParams{Limit: 10}},
			{"limit 0", workflow.ListRunsParams{Owner: asAlice}},
			{"limit -1", workflow.ListRunsParams{Owner: asAlice, Limit: -1}},
			{"limit 1001", workflow.ListRunsParams{Owner: asAlice, Limit: 1001}},
			{"unknown status", workflow.ListRunsParams{Owner: asAlice, Limit: 10, Status: "paused"}},
			{"unknown cursor", workflow.ListRunsParams{Owner: asAlice, Limit: 10, BeforeID: newID("run")}},
			{"another owner's run as cursor", workflow.ListRunsParams{Owner: asAlice, Limit: 10, BeforeID: rb.ID}},
		}
		for _, c := range cases {
			_, err := s.ListRuns(t.Context(), c.p)
			wantCode(t, err, runstream.CodeInvalidArgument, c.name)
		}
		got, err := s.ListRuns(t.Context(), workflow.ListRunsParams{Owner: asAlice, Limit: 1000})
		if err != nil || len(got) != 1 {
			t.Errorf("ListRuns limit 1000: %v, %v; want 1 run", runIDs(got), err)
		}
	}},
}

// runsNewestFirst sorts runs by CreatedAt descending, then ID descending.
func runsNewestFirst(rs []workflow.Run) {
	slices.SortFunc(rs, func(a, b workflow.Run) int {
		if c := b.CreatedAt.Compare(a.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(b.ID, a.ID)
	})
}

// pageRuns lists runs with p, p.Limit at a time, and checks that the pages
// are want in order, each run once.
func pageRuns(t *testing.T, s workflow.Store, p workflow.ListRunsParams, want []workflow.Run) {
	t.Helper()
	var got []workflow.Run
	for range len(want) + 2 {
		page, err := s.ListRuns(t.Context(), p)
		if err != nil {
			t.Fatalf("ListRuns(%+v): %v", p, err)
		}
		if len(page) > p.Limit {
			t.Fatalf("ListRuns(limit %d) returned %d", p.Limit, len(page))
		}
		got = append(got, page...)
		if len(page) < p.Limit {
			break
		}
		p.BeforeID = page[len(page)-1].ID
	}
	sameRuns(t, fmt.Sprintf("paging %+v", p), got, want)
}
