package threadsvc_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/internal/threadtest"
	"github.com/runstream/runstream/runevents"
)

// ownerReader gives a memory store's reader runevents.ThreadOwner and
// counts its calls.
type ownerReader struct {
	runevents.ThreadReader
	calls atomic.Int32
}

func (r *ownerReader) FirstThreadOwner(ctx context.Context, threadID string) (string, bool, error) {
	r.calls.Add(1)
	rows, err := r.ListThreadEvents(ctx, runevents.ListThreadEventsParams{ThreadID: threadID, Owner: runevents.AnyOwner, Limit: 1})
	if err != nil || len(rows) == 0 {
		return "", false, err
	}
	return rows[0].UserID, true, nil
}

// The ownership check asks a store that has runevents.ThreadOwner for the
// owner of the thread's first row, and answers as with a read of the row:
// the owner writes, another user does not, and once the owner's rows are
// deleted the thread is the next writer's.
func TestWritableReadsTheFirstOwner(t *testing.T) {
	t.Parallel()
	reader := &ownerReader{}
	svc := threadtest.ServiceReading(t, func(r runevents.ThreadReader) runevents.ThreadReader {
		reader.ThreadReader = r
		return reader
	})
	ctx := t.Context()
	appendAs := func(user string) error {
		_, err := svc.Append(ctx, user, "t1", []runevents.NewEvent{startEvent()})
		return err
	}

	if err := appendAs("alice"); err != nil {
		t.Fatalf("alice's first append: %v", err)
	}
	if err := appendAs("alice"); err != nil {
		t.Fatalf("alice's second append: %v", err)
	}
	if n := reader.calls.Load(); n != 2 {
		t.Errorf("FirstThreadOwner called %d times for two appends, want 2", n)
	}
	if err := appendAs("bob"); runstream.ErrorCodeOf(err) != runstream.CodeNotFound {
		t.Errorf("bob writes to alice's thread: %v, want NOT_FOUND", err)
	}
	if _, err := svc.DeleteThreadEvents(ctx, "alice", "t1"); err != nil {
		t.Fatal(err)
	}
	if err := appendAs("bob"); err != nil {
		t.Fatalf("bob's append to the emptied thread: %v", err)
	}
	if err := appendAs("alice"); runstream.ErrorCodeOf(err) != runstream.CodeNotFound {
		t.Errorf("alice writes to the thread that is bob's now: %v, want NOT_FOUND", err)
	}
}
