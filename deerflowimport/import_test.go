package deerflowimport

import (
	"errors"
	"testing"

	"github.com/runstream/runstream/contracts"
	"github.com/runstream/runstream/eventlog"
	"github.com/runstream/runstream/memory"
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
