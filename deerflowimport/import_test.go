package deerflowimport

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/runstream/runstream/contracts"
	"github.com/runstream/runstream/eventlog"
	"github.com/runstream/runstream/memory"
	"github.com/runstream/runstream/runevents"
)

// fakeSource yields one thread's rows and problems.
type fakeSource struct {
	rows []Row
	bad  []Problem
}

func (fakeSource) Name() string                               { return "fake" }
func (fakeSource) Close() error                               { return nil }
func (fakeSource) Runs(func(Problem)) ([]Run, error)          { return nil, nil }
func (fakeSource) Feedback(func(Problem)) ([]Feedback, error) { return nil, nil }
func (s fakeSource) Threads(fn func(string, []Row, []Problem) error) error {
	return fn("t1", s.rows, s.bad)
}

// TestImportThreadWithoutReadableRows leaves out a thread none of whose
// rows could be read, --skip-bad-rows or not, rather than count it
// imported with no rows.
func TestImportThreadWithoutReadableRows(t *testing.T) {
	t.Parallel()
	v, err := contracts.NewValidator()
	if err != nil {
		t.Fatal(err)
	}
	events := memory.NewRunEventStore()
	target := Target{Log: eventlog.NewThreadLog(events, v, nil, eventlog.ThreadLimits{}), Threads: events, Runs: memory.NewRunStore()}
	src := fakeSource{bad: []Problem{{"threads/t1/runs/r1.jsonl:1", errors.New("not a JSON record")}}}
	for _, skip := range []bool{false, true} {
		sum, err := Import(t.Context(), target, []Source{src}, Options{DefaultOwner: "local", SkipBadRows: skip}, nil)
		if err != nil || sum.Threads != 0 || sum.ThreadsLeftOut != 1 || len(sum.Problems) != 2 || sum.OK() {
			t.Errorf("skip %v: %s, %v; want the thread left out and 2 problems", skip, sum, err)
		}
	}
}

// TestImportRowLimit refuses a row above the target's event limit with its
// location, and takes it under a larger one.
func TestImportRowLimit(t *testing.T) {
	t.Parallel()
	v, err := contracts.NewValidator()
	if err != nil {
		t.Fatal(err)
	}
	image := `{"type":"human","content":[{"type":"image_url","image_url":"data:image/png;base64,` + strings.Repeat("A", 300<<10) + `"}]}`
	row := Row{Loc: "run_events id=7", Owned: true, Event: runevents.ImportEvent{Seq: 1, NewEvent: runevents.NewEvent{
		ThreadID: "t1", RunID: "r1", UserID: "u", EventType: runevents.EventLLMHumanInput, Category: runevents.CategoryMessage,
		Content: json.RawMessage(image), Metadata: json.RawMessage(`{"caller":"lead_agent"}`), CreatedAt: time.Now()}}}
	for _, limit := range []int{0, 512 << 10} {
		events := memory.NewRunEventStore()
		target := Target{Log: eventlog.NewThreadLog(events, v, nil, eventlog.ThreadLimits{MaxEventBytes: limit}), Threads: events, Runs: memory.NewRunStore()}
		var problems []string
		sum, err := Import(t.Context(), target, []Source{fakeSource{rows: []Row{row}}}, Options{}, func(p Problem) { problems = append(problems, p.String()) })
		switch {
		case err != nil:
			t.Fatal(err)
		case limit == 0 && (sum.ThreadsLeftOut != 1 || len(problems) == 0 || !strings.HasPrefix(problems[0], "run_events id=7: the row has ") || !strings.Contains(problems[0], "the limit is 262144")):
			t.Errorf("default limit: %s %q", sum, problems)
		case limit > 0 && (sum.Threads != 1 || !sum.OK()):
			t.Errorf("512 KiB limit: %s %q", sum, problems)
		}
	}
}

// runsSource yields run rows only.
type runsSource struct {
	fakeSource
	runs []Run
}

func (s runsSource) Runs(func(Problem)) ([]Run, error) { return s.runs, nil }

func (runsSource) Threads(func(string, []Row, []Problem) error) error { return nil }

// TestImportFinishedRunIsAConflict: a source's newer row that would move
// runstream's finished row to another status is a conflict, reported,
// and the import goes on with the next row.
func TestImportFinishedRunIsAConflict(t *testing.T) {
	t.Parallel()
	v, err := contracts.NewValidator()
	if err != nil {
		t.Fatal(err)
	}
	events, runs := memory.NewRunEventStore(), memory.NewRunStore()
	created := time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC)
	row := func(run string, status runevents.RunStatus, updated time.Duration) runevents.ThreadRun {
		return runevents.ThreadRun{ThreadID: "t1", RunID: run, OwnerID: "local", Status: status, OperationKind: "run",
			CreatedAt: created, UpdatedAt: created.Add(updated)}
	}
	if _, err := runs.PutRun(t.Context(), row("r1", runevents.RunInterrupted, time.Minute)); err != nil {
		t.Fatal(err)
	}
	target := Target{Log: eventlog.NewThreadLog(events, v, nil, eventlog.ThreadLimits{}), Threads: events, Runs: runs}
	src := runsSource{runs: []Run{{Loc: "runs/r1", Row: row("r1", runevents.RunSuccess, time.Hour)}, {Loc: "runs/r2", Row: row("r2", runevents.RunSuccess, time.Hour)}}}
	sum, err := Import(t.Context(), target, []Source{src}, Options{DefaultOwner: "local"}, nil)
	if err != nil || sum.Conflicts != 1 || sum.Runs != 1 || len(sum.Problems) != 1 {
		t.Fatalf("import: %s, %v; want r1 a conflict and r2 imported", sum, err)
	}
	if got, _ := runs.GetRun(t.Context(), "t1", "r1", runevents.AnyOwner); got.Status != runevents.RunInterrupted {
		t.Errorf("r1 is %s, want interrupted, as it was", got.Status)
	}
}
