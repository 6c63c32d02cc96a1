package runeventstest

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/runevents"
)

// RunStoreSuite runs the conformance tests of runevents.RunStore against
// the stores open returns (a new, empty store per call, from parallel
// subtests): PutRun's create and update rules, GetRun, FindRun and
// ListRuns with their owner rules, feedback upserts and listing, and the
// DeerFlow run row and feedback fields (deerflowRunTests).
//
// Decided semantics the suite pins, beyond the interface doc: an empty
// OperationKind is stored as "run", nil Metadata as {}; zero timestamps
// are stamped with the current time; timestamps keep microsecond
// precision; FindRun, when several threads hold a run id, returns the
// oldest visible row; ListRuns orders by CreatedAt, then run id; a
// feedback rating is a JSON number or string, anything else is
// CodeInvalidArgument.
func RunStoreSuite(t *testing.T, open func(t *testing.T) runevents.RunStore) {
	t.Helper()
	for _, tc := range slices.Concat(runStoreTests, deerflowRunTests, importFeedbackTests) {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := open(t)
			if s == nil {
				t.Fatal("runeventstest: open returned nil")
			}
			tc.run(t, s)
		})
	}
}

var runBase = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// threadRun returns a run of alice created at base+minute.
func threadRun(thread, run string, minute int, status runevents.RunStatus) runevents.ThreadRun {
	at := runBase.Add(time.Duration(minute) * time.Minute)
	return runevents.ThreadRun{ThreadID: thread, RunID: run, OwnerID: alice, Status: status, CreatedAt: at, UpdatedAt: at}
}

func putRun(t *testing.T, s runevents.RunStore, r runevents.ThreadRun) runevents.ThreadRun {
	t.Helper()
	got, err := s.PutRun(t.Context(), r)
	if err != nil {
		t.Fatalf("PutRun(%s/%s): %v", r.ThreadID, r.RunID, err)
	}
	return got
}

func runIDs(runs []runevents.ThreadRun) []string {
	out := make([]string, len(runs))
	for i, r := range runs {
		out[i] = r.RunID
	}
	return out
}

func sameRun(t *testing.T, what string, got, want runevents.ThreadRun) {
	t.Helper()
	g, _ := json.Marshal(runShape(got))
	w, _ := json.Marshal(runShape(want))
	if string(g) != string(w) {
		t.Errorf("%s:\n got %s\nwant %s", what, g, w)
	}
}

// runShape renders a run with instants compared in UTC.
func runShape(r runevents.ThreadRun) map[string]any {
	var meta any
	json.Unmarshal(r.Metadata, &meta)
	return map[string]any{
		"thread": r.ThreadID, "run": r.RunID, "owner": r.OwnerID, "status": r.Status, "kind": r.OperationKind,
		"model": r.ModelName, "metadata": meta, "usage": r.Usage,
		"created": r.CreatedAt.UTC().Format(time.RFC3339Nano), "updated": r.UpdatedAt.UTC().Format(time.RFC3339Nano),
	}
}

var runStoreTests = []struct {
	name string
	run  func(t *testing.T, s runevents.RunStore)
}{
	{"CreateThenGet", func(t *testing.T, s runevents.RunStore) {
		r := threadRun("t1", "r1", 0, runevents.RunRunning)
		r.ModelName = "gpt-x"
		r.Metadata = json.RawMessage(`{ "regenerate_from_run_id": "r0", "replay_kind": "edit" }`)
		r.Usage = runevents.Usage{TotalInputTokens: 3, TotalOutputTokens: 4, TotalTokens: 7, LLMCallCount: 1, LeadAgentTokens: 5, SubagentTokens: 2,
			ByModel: map[string]runevents.ModelUsage{"gpt-x": {InputTokens: 3, OutputTokens: 4, TotalTokens: 7}}}
		r.CreatedAt = time.Date(2026, 3, 1, 12, 0, 0, 123456789, time.FixedZone("", 3600))
		got := putRun(t, s, r)
		want := r
		want.OperationKind = "run"
		want.Metadata = json.RawMessage(`{"regenerate_from_run_id":"r0","replay_kind":"edit"}`)
		want.CreatedAt = r.CreatedAt.Truncate(time.Microsecond)
		sameRun(t, "PutRun result", got, want)
		read, err := s.GetRun(t.Context(), "t1", "r1", asAlice)
		if err != nil {
			t.Fatal(err)
		}
		sameRun(t, "GetRun", read, want)
		if string(read.Metadata) != string(want.Metadata) {
			t.Errorf("metadata %s, want the compact %s", read.Metadata, want.Metadata)
		}
		read.Usage.ByModel["gpt-x"] = runevents.ModelUsage{}
		read.Metadata[2] = 'X'
		again, _ := s.GetRun(t.Context(), "t1", "r1", asAlice)
		sameRun(t, "GetRun after changing a returned row", again, want)
	}},
	{"Defaults", func(t *testing.T, s runevents.RunStore) {
		before := time.Now().Add(-time.Second)
		got := putRun(t, s, runevents.ThreadRun{ThreadID: "t1", RunID: "r1", OwnerID: alice, Status: runevents.RunPending})
		if got.OperationKind != "run" || string(got.Metadata) != "{}" {
			t.Errorf("defaults: kind %q metadata %s, want run and {}", got.OperationKind, got.Metadata)
		}
		if got.CreatedAt.Before(before) || got.UpdatedAt.Before(before) {
			t.Errorf("zero timestamps stamped %v / %v, want now", got.CreatedAt, got.UpdatedAt)
		}
		kept := putRun(t, s, runevents.ThreadRun{ThreadID: "t1", RunID: "r2", OwnerID: alice, Status: runevents.RunPending, OperationKind: "title"})
		if kept.OperationKind != "title" {
			t.Errorf("operation kind %q, want title", kept.OperationKind)
		}
	}},
	{"UpdateKeepsCreatedAtAndOwner", func(t *testing.T, s runevents.RunStore) {
		first := putRun(t, s, threadRun("t1", "r1", 0, runevents.RunRunning))
		upd := threadRun("t1", "r1", 30, runevents.RunSuccess)
		upd.ModelName = "m2"
		upd.Metadata = json.RawMessage(`{"a":1}`)
		upd.Usage = runevents.Usage{TotalTokens: 9}
		got := putRun(t, s, upd)
		want := upd
		want.OperationKind = "run"
		want.CreatedAt = first.CreatedAt
		sameRun(t, "updated row", got, want)
		read, _ := s.GetRun(t.Context(), "t1", "r1", asAlice)
		sameRun(t, "GetRun after update", read, want)
		if runs, _ := s.ListRuns(t.Context(), "t1", asAlice); len(runs) != 1 {
			t.Errorf("ListRuns after an update: %d rows, want 1", len(runs))
		}
	}},
	{"OtherOwnerCannotUpdate", func(t *testing.T, s runevents.RunStore) {
		want := putRun(t, s, threadRun("t1", "r1", 0, runevents.RunRunning))
		byBob := threadRun("t1", "r1", 5, runevents.RunError)
		byBob.OwnerID = bob
		_, err := s.PutRun(t.Context(), byBob)
		wantCode(t, err, runstream.CodeNotFound, "PutRun over alice's row by bob")
		internal := byBob
		internal.OwnerID = ""
		_, err = s.PutRun(t.Context(), internal)
		wantCode(t, err, runstream.CodeNotFound, "PutRun over alice's row by the internal writer")
		got, _ := s.GetRun(t.Context(), "t1", "r1", asAlice)
		sameRun(t, "alice's row", got, want)
	}},
	{"OwnerRules", func(t *testing.T, s runevents.RunStore) {
		putRun(t, s, threadRun("t1", "r1", 0, runevents.RunSuccess))
		bobs := threadRun("t1", "r2", 1, runevents.RunSuccess)
		bobs.OwnerID = bob
		putRun(t, s, bobs)
		for _, c := range []struct {
			owner runevents.Owner
			run   string
			ok    bool
		}{
			{asAlice, "r1", true}, {asAlice, "r2", false}, {asBob, "r2", true}, {asBob, "r1", false},
			{runevents.OwnedBy("carol"), "r1", false}, {runevents.AnyOwner, "r1", true}, {runevents.AnyOwner, "r2", true},
			{asAlice, "missing", false},
		} {
			what := fmt.Sprintf("run %s as %q (any=%v)", c.run, c.owner.UserID(), c.owner.All())
			_, err := s.GetRun(t.Context(), "t1", c.run, c.owner)
			_, ferr := s.FindRun(t.Context(), c.run, c.owner)
			if c.ok {
				if err != nil || ferr != nil {
					t.Errorf("%s: GetRun %v, FindRun %v; want the row", what, err, ferr)
				}
				continue
			}
			wantCode(t, err, runstream.CodeNotFound, "GetRun "+what)
			wantCode(t, ferr, runstream.CodeNotFound, "FindRun "+what)
		}
		for _, c := range []struct {
			owner runevents.Owner
			want  []string
		}{{asAlice, []string{"r1"}}, {asBob, []string{"r2"}}, {runevents.OwnedBy("carol"), nil}, {runevents.AnyOwner, []string{"r1", "r2"}}} {
			runs, err := s.ListRuns(t.Context(), "t1", c.owner)
			if err != nil || fmt.Sprint(runIDs(runs)) != fmt.Sprint(c.want) {
				t.Errorf("ListRuns as %q: %v, %v; want %v", c.owner.UserID(), runIDs(runs), err, c.want)
			}
		}
	}},
	{"FindRun", func(t *testing.T, s runevents.RunStore) {
		putRun(t, s, threadRun("t2", "shared", 10, runevents.RunSuccess))
		putRun(t, s, threadRun("t1", "shared", 20, runevents.RunSuccess))
		putRun(t, s, threadRun("t3", "only", 5, runevents.RunRunning))
		got, err := s.FindRun(t.Context(), "only", asAlice)
		if err != nil || got.ThreadID != "t3" {
			t.Errorf("FindRun(only) = %s, %v; want the row of t3", got.ThreadID, err)
		}
		got, err = s.FindRun(t.Context(), "shared", asAlice)
		if err != nil || got.ThreadID != "t2" {
			t.Errorf("FindRun(shared) = %s, %v; want the oldest row, of t2", got.ThreadID, err)
		}
		_, err = s.FindRun(t.Context(), "bad id", asAlice)
		wantCode(t, err, runstream.CodeInvalidArgument, "FindRun with a bad id")
	}},
	{"ListRunsOrder", func(t *testing.T, s runevents.RunStore) {
		for _, r := range []runevents.ThreadRun{
			threadRun("t1", "c", 3, runevents.RunSuccess),
			threadRun("t1", "a", 1, runevents.RunSuccess),
			threadRun("t1", "z", 2, runevents.RunSuccess),
			threadRun("t1", "b", 2, runevents.RunSuccess),
			threadRun("t2", "other", 0, runevents.RunSuccess),
		} {
			putRun(t, s, r)
		}
		runs, err := s.ListRuns(t.Context(), "t1", asAlice)
		if want := "[a b z c]"; err != nil || fmt.Sprint(runIDs(runs)) != want {
			t.Errorf("ListRuns = %v, %v; want %s (created_at, then run id)", runIDs(runs), err, want)
		}
		if runs, err := s.ListRuns(t.Context(), "t-none", asAlice); err != nil || len(runs) != 0 {
			t.Errorf("ListRuns of an unknown thread = %v, %v; want none", runIDs(runs), err)
		}
	}},
	{"ListRunsNewest", func(t *testing.T, s runevents.RunStore) {
		bobs := threadRun("t1", "y", 2, runevents.RunSuccess)
		bobs.OwnerID = bob
		for _, r := range []runevents.ThreadRun{
			threadRun("t1", "c", 3, runevents.RunSuccess),
			threadRun("t1", "a", 1, runevents.RunSuccess),
			threadRun("t1", "z", 2, runevents.RunSuccess),
			threadRun("t1", "b", 2, runevents.RunSuccess),
			bobs,
			threadRun("t2", "other", 9, runevents.RunSuccess),
		} {
			putRun(t, s, r)
		}
		for _, c := range []struct {
			owner         runevents.Owner
			limit, offset int
			want          string
		}{
			{asAlice, 10, 0, "[c z b a]"}, // created_at, then run id, both descending
			{asAlice, 2, 0, "[c z]"},
			{asAlice, 2, 2, "[b a]"},
			{asAlice, 2, 3, "[a]"},
			{asAlice, 2, 4, "[]"},
			{asAlice, 2, -5, "[c z]"}, // a negative offset counts as 0
			{asAlice, 0, 0, "[]"},
			{asAlice, -1, 0, "[]"},
			{asBob, 10, 0, "[y]"},
			{runevents.AnyOwner, 3, 1, "[z y b]"},
			{runevents.OwnedBy("carol"), 10, 0, "[]"},
		} {
			runs, err := s.ListRunsNewest(t.Context(), "t1", c.owner, c.limit, c.offset)
			if err != nil || fmt.Sprint(runIDs(runs)) != c.want {
				t.Errorf("ListRunsNewest as %q (all %v), limit %d, offset %d = %v, %v; want %s",
					c.owner.UserID(), c.owner.All(), c.limit, c.offset, runIDs(runs), err, c.want)
			}
		}
		if runs, err := s.ListRunsNewest(t.Context(), "t-none", asAlice, 10, 0); err != nil || len(runs) != 0 {
			t.Errorf("ListRunsNewest of an unknown thread = %v, %v; want none", runIDs(runs), err)
		}
		_, err := s.ListRunsNewest(t.Context(), "bad id", asAlice, 10, 0)
		wantCode(t, err, runstream.CodeInvalidArgument, "ListRunsNewest with a bad thread id")
	}},
	{"FinishedRunKeepsItsStatus", func(t *testing.T, s runevents.RunStore) {
		ctx := t.Context()
		all := []runevents.RunStatus{runevents.RunPending, runevents.RunRunning, runevents.RunSuccess, runevents.RunError, runevents.RunInterrupted, runevents.RunTimeout}
		for i, from := range all {
			for j, to := range all {
				run := fmt.Sprintf("r%d-%d", i, j)
				first := threadRun("t1", run, 0, from)
				putRun(t, s, first)
				next := threadRun("t1", run, 1, to)
				next.Usage.TotalTokens = 7
				_, err := s.PutRun(ctx, next)
				got, gerr := s.GetRun(ctx, "t1", run, asAlice)
				if gerr != nil {
					t.Fatalf("GetRun %s: %v", run, gerr)
				}
				allowed := from == runevents.RunPending || from == runevents.RunRunning || from == to ||
					(from == runevents.RunInterrupted && to == runevents.RunError)
				switch {
				case allowed && (err != nil || got.Status != to || got.Usage.TotalTokens != 7):
					t.Errorf("%s → %s: %v, row %s with %d tokens; want it written", from, to, err, got.Status, got.Usage.TotalTokens)
				case !allowed:
					wantCode(t, err, runstream.CodeConflict, fmt.Sprintf("%s → %s", from, to))
					if got.Status != from || got.Usage.TotalTokens != 0 {
						t.Errorf("%s → %s refused, but the row is %s with %d tokens", from, to, got.Status, got.Usage.TotalTokens)
					}
				}
			}
		}
		// Another user's row is still not found, whatever its status.
		bobs := threadRun("t1", "r0-2", 2, runevents.RunRunning)
		bobs.OwnerID = bob
		_, err := s.PutRun(ctx, bobs)
		wantCode(t, err, runstream.CodeNotFound, "PutRun over another user's finished row")
	}},
	{"InvalidArguments", func(t *testing.T, s runevents.RunStore) {
		ctx := t.Context()
		for name, r := range map[string]runevents.ThreadRun{
			"bad thread id":  {ThreadID: "t/1", RunID: "r1", Status: runevents.RunRunning},
			"bad run id":     {ThreadID: "t1", RunID: "", Status: runevents.RunRunning},
			"bad status":     {ThreadID: "t1", RunID: "r1", Status: "done"},
			"array metadata": {ThreadID: "t1", RunID: "r1", Status: runevents.RunRunning, Metadata: json.RawMessage(`[1]`)},
			"bad metadata":   {ThreadID: "t1", RunID: "r1", Status: runevents.RunRunning, Metadata: json.RawMessage(`{`)},
		} {
			_, err := s.PutRun(ctx, r)
			wantCode(t, err, runstream.CodeInvalidArgument, "PutRun with "+name)
		}
		_, err := s.GetRun(ctx, "t1", "r1", runevents.Owner{})
		wantCode(t, err, runstream.CodeInvalidArgument, "GetRun without owner")
		_, err = s.ListRuns(ctx, "t1", runevents.Owner{})
		wantCode(t, err, runstream.CodeInvalidArgument, "ListRuns without owner")
		_, err = s.FindRun(ctx, "r1", runevents.Owner{})
		wantCode(t, err, runstream.CodeInvalidArgument, "FindRun without owner")
		_, err = s.ListFeedback(ctx, "t1", []string{"r1"}, runevents.Owner{})
		wantCode(t, err, runstream.CodeInvalidArgument, "ListFeedback without owner")
		if runs, _ := s.ListRuns(ctx, "t1", runevents.AnyOwner); len(runs) != 0 {
			t.Errorf("refused writes stored %d rows", len(runs))
		}
	}},
	{"DeleteFeedback", func(t *testing.T, s runevents.RunStore) {
		ctx := t.Context()
		putRun(t, s, threadRun("t1", "r1", 0, runevents.RunSuccess))
		putRun(t, s, threadRun("t1", "r2", 1, runevents.RunSuccess))
		for _, f := range []runevents.Feedback{
			{ThreadID: "t1", RunID: "r1", UserID: alice, Rating: json.RawMessage(`1`)},
			{ThreadID: "t1", RunID: "r1", UserID: bob, Rating: json.RawMessage(`-1`)},
			{ThreadID: "t1", RunID: "r2", UserID: alice, Rating: json.RawMessage(`1`)},
		} {
			if _, err := s.PutFeedback(ctx, f); err != nil {
				t.Fatal(err)
			}
		}
		if n, err := s.DeleteFeedback(ctx, "t1", "r1", runevents.OwnedBy(alice)); n != 1 || err != nil {
			t.Fatalf("alice deletes hers on r1 = %d, %v; want 1", n, err)
		}
		if n, err := s.DeleteFeedback(ctx, "t1", "r1", runevents.OwnedBy(alice)); n != 0 || err != nil {
			t.Errorf("alice deletes again = %d, %v; want 0", n, err)
		}
		if n, err := s.DeleteFeedback(ctx, "t9", "r1", runevents.OwnedBy(bob)); n != 0 || err != nil {
			t.Errorf("bob deletes on another thread = %d, %v; want 0", n, err)
		}
		left, err := s.ListFeedback(ctx, "t1", []string{"r1", "r2"}, runevents.AnyOwner)
		if err != nil || len(left) != 2 || left["r1"].UserID != bob || left["r2"].UserID != alice {
			t.Errorf("after alice's delete: %+v, %v; want bob's on r1 and alice's on r2", left, err)
		}
		if n, err := s.DeleteFeedback(ctx, "t1", "r1", runevents.AnyOwner); n != 1 || err != nil {
			t.Errorf("AnyOwner deletes r1 = %d, %v; want bob's 1", n, err)
		}
		if left, _ := s.ListFeedback(ctx, "t1", []string{"r1", "r2"}, runevents.AnyOwner); len(left) != 1 || left["r2"].UserID != alice {
			t.Errorf("after deleting r1: %+v; want alice's on r2 only", left)
		}
		_, err = s.DeleteFeedback(ctx, "t1", "r1", runevents.Owner{})
		wantCode(t, err, runstream.CodeInvalidArgument, "DeleteFeedback without owner")
		_, err = s.DeleteFeedback(ctx, "t/1", "r1", runevents.OwnedBy(alice))
		wantCode(t, err, runstream.CodeInvalidArgument, "DeleteFeedback with a bad thread id")
	}},
	{"FeedbackUpsertKeepsID", func(t *testing.T, s runevents.RunStore) {
		putRun(t, s, threadRun("t1", "r1", 0, runevents.RunSuccess))
		first, err := s.PutFeedback(t.Context(), runevents.Feedback{ThreadID: "t1", RunID: "r1", UserID: alice, Rating: json.RawMessage(`1`), Comment: "good"})
		if err != nil || first.ID == "" || string(first.Rating) != "1" || first.Comment != "good" {
			t.Fatalf("PutFeedback = %+v, %v", first, err)
		}
		second, err := s.PutFeedback(t.Context(), runevents.Feedback{ThreadID: "t1", RunID: "r1", UserID: alice, Rating: json.RawMessage(` "up" `), Comment: "better"})
		if err != nil || second.ID != first.ID || string(second.Rating) != `"up"` || second.Comment != "better" {
			t.Errorf("second PutFeedback = %+v, %v; want the same id %s, the new rating and comment", second, err, first.ID)
		}
		if !second.CreatedAt.Equal(first.CreatedAt) {
			t.Errorf("created_at changed from %v to %v", first.CreatedAt, second.CreatedAt)
		}
		got, err := s.ListFeedback(t.Context(), "t1", []string{"r1"}, asAlice)
		if f := got["r1"]; err != nil || len(got) != 1 || f.ID != first.ID || f.Comment != "better" || string(f.Rating) != `"up"` {
			t.Errorf("ListFeedback = %+v, %v; want the replaced feedback", got, err)
		}
		long := `"` + strings.Repeat("u", runevents.MaxFeedbackRating) + `"`
		for _, bad := range []string{`null`, `{"a":1}`, `[1]`, `true`, ``, `"a\u0000b"`, "\"\xff\"", long} {
			_, err := s.PutFeedback(t.Context(), runevents.Feedback{ThreadID: "t1", RunID: "r1", UserID: alice, Rating: json.RawMessage(bad)})
			wantCode(t, err, runstream.CodeInvalidArgument, "PutFeedback with rating "+bad)
		}
		for _, bad := range []string{"a\x00b", "\xff", strings.Repeat("c", runevents.MaxFeedbackComment+1)} {
			_, err := s.PutFeedback(t.Context(), runevents.Feedback{ThreadID: "t1", RunID: "r1", UserID: alice, Rating: json.RawMessage(`1`), Comment: bad})
			wantCode(t, err, runstream.CodeInvalidArgument, fmt.Sprintf("PutFeedback with comment %.20q", bad))
		}
		if got, err := s.ListFeedback(t.Context(), "t1", []string{"r1"}, asAlice); err != nil || got["r1"].Comment != "better" {
			t.Errorf("ListFeedback after refused writes = %+v, %v; want the feedback unchanged", got, err)
		}
	}},
	{"FeedbackOwners", func(t *testing.T, s runevents.RunStore) {
		put := func(run, user, comment string) runevents.Feedback {
			f, err := s.PutFeedback(t.Context(), runevents.Feedback{ThreadID: "t1", RunID: run, UserID: user, Rating: json.RawMessage(`1`), Comment: comment})
			if err != nil {
				t.Fatal(err)
			}
			return f
		}
		a1 := put("r1", alice, "alice on r1")
		b1 := put("r1", bob, "bob on r1")
		a2 := put("r2", alice, "alice on r2")
		if a1.ID == b1.ID || a1.ID == a2.ID {
			t.Errorf("feedback ids not distinct: %s %s %s", a1.ID, b1.ID, a2.ID)
		}
		other, err := s.PutFeedback(t.Context(), runevents.Feedback{ThreadID: "t2", RunID: "r1", UserID: alice, Rating: json.RawMessage(`0`), Comment: "other thread"})
		if err != nil || other.ID == a1.ID {
			t.Errorf("feedback in another thread: %+v, %v; want its own id", other, err)
		}
		comments := func(m map[string]runevents.Feedback) map[string]string {
			out := map[string]string{}
			for run, f := range m {
				out[run] = f.Comment
			}
			return out
		}
		for _, c := range []struct {
			owner runevents.Owner
			runs  []string
			want  map[string]string
		}{
			{asAlice, []string{"r1", "r2", "r3"}, map[string]string{"r1": "alice on r1", "r2": "alice on r2"}},
			{asBob, []string{"r1", "r2"}, map[string]string{"r1": "bob on r1"}},
			{runevents.OwnedBy("carol"), []string{"r1"}, map[string]string{}},
			{asAlice, []string{"r2"}, map[string]string{"r2": "alice on r2"}},
			{asAlice, nil, map[string]string{}},
		} {
			got, err := s.ListFeedback(t.Context(), "t1", c.runs, c.owner)
			if err != nil || fmt.Sprint(comments(got)) != fmt.Sprint(c.want) {
				t.Errorf("ListFeedback(%v) as %q: %v, %v; want %v", c.runs, c.owner.UserID(), comments(got), err, c.want)
			}
		}
		// With AnyOwner a run has one feedback: the newest, which the suite
		// cannot order without a clock, so either user's.
		got, err := s.ListFeedback(t.Context(), "t1", []string{"r1", "r2"}, runevents.AnyOwner)
		if c := comments(got); err != nil || len(c) != 2 || (c["r1"] != "alice on r1" && c["r1"] != "bob on r1") || c["r2"] != "alice on r2" {
			t.Errorf("ListFeedback as AnyOwner: %v, %v; want one feedback per run", c, err)
		}
	}},
}
