package threadsvc_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/runstream/runstream/memory"
	"github.com/runstream/runstream/runevents"
	"github.com/runstream/runstream/threadsvc"
)

// wholeListRefused is a run store whose ListRuns (every run of a thread)
// fails, so that a caller that wants one page must ask for the page.
type wholeListRefused struct{ *memory.RunStore }

func (wholeListRefused) ListRuns(context.Context, string, runevents.Owner) ([]runevents.ThreadRun, error) {
	return nil, errors.New("ListRuns reads every run of the thread")
}

// The runs list reads one page from the store, newest first, not every
// run of the thread.
func TestListRunsReadsOnePage(t *testing.T) {
	t.Parallel()
	runs := memory.NewRunStore()
	ctx := t.Context()
	start := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	for i := range 5 {
		r := runevents.ThreadRun{ThreadID: "t1", RunID: fmt.Sprintf("r%d", i), OwnerID: "alice", Status: runevents.RunSuccess,
			CreatedAt: start.Add(time.Duration(i) * time.Second)}
		if _, err := runs.PutRun(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	svc := threadsvc.New(nil, nil, wholeListRefused{runs}, nil, nil, threadsvc.Config{})
	page, err := svc.ListRuns(ctx, "alice", "t1", 2, 1)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, r := range page {
		ids = append(ids, r.RunID)
	}
	if fmt.Sprint(ids) != "[r3 r2]" {
		t.Errorf("page %v, want [r3 r2]: newest first, after the newest", ids)
	}
}
