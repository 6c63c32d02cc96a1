package threadsvc_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/internal/threadtest"
	"github.com/runstream/runstream/runevents"
	"github.com/runstream/runstream/threadsvc"
)

// ownerReader gives a memory store's reader runevents.ThreadOwner and
// counts its calls.
type ownerReader struct {
	runevents.ThreadReader
	calls atomic.Int32
}

// wrap makes r read through inner (for threadtest.ServiceReading).
func (r *ownerReader) wrap(inner runevents.ThreadReader) runevents.ThreadReader {
	r.ThreadReader = inner
	return r
}

// appender returns a function that appends a run-start event to thread
// t1 of svc as a user.
func appender(t *testing.T, svc *threadsvc.Service) func(user string) error {
	return func(user string) error {
		_, err := svc.Append(t.Context(), user, "t1", []runevents.NewEvent{startEvent()})
		return err
	}
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
	svc := threadtest.ServiceReading(t, reader.wrap)
	appendAs := appender(t, svc)
	ctx := t.Context()

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

// ownedStore gives a memory store runevents.OwnedAppender (its check and
// append under one lock, as a transaction would make them) and counts
// its calls.
type ownedStore struct {
	runevents.Store
	rows  runevents.ThreadReader // the same store's
	mu    sync.Mutex
	calls atomic.Int32
}

func (s *ownedStore) PutBatchOwned(ctx context.Context, userID string, events []runevents.NewEvent) ([]runevents.Record, error) {
	s.calls.Add(1)
	s.mu.Lock()
	defer s.mu.Unlock()
	rows, err := s.rows.ListThreadEvents(ctx, runevents.ListThreadEventsParams{ThreadID: events[0].ThreadID, Owner: runevents.AnyOwner, Limit: 1})
	if err != nil {
		return nil, err
	}
	if len(rows) == 0 || rows[0].UserID != userID {
		return nil, runevents.ErrNotFirstOwner
	}
	return s.PutBatch(ctx, events)
}

// On a store that checks the owner inside the append, an append to the
// caller's own thread reads nothing before it; the first append of a
// thread, and any append to another user's, take the full check, which
// still refuses another user's thread with nothing stored.
func TestAppendToOwnThreadReadsNothing(t *testing.T) {
	t.Parallel()
	reader := &ownerReader{}
	store := &ownedStore{}
	appendAs := appender(t, threadtest.ServiceOver(t, func(s runevents.Store) runevents.Store {
		store.Store, store.rows = s, s.(runevents.ThreadReader)
		return store
	}, reader.wrap))
	ctx := t.Context()

	if err := appendAs("alice"); err != nil {
		t.Fatalf("alice's first append: %v", err)
	}
	if n := reader.calls.Load(); n != 1 {
		t.Errorf("the first append read the owner %d times, want 1", n)
	}
	for range 3 {
		if err := appendAs("alice"); err != nil {
			t.Fatalf("alice's next append: %v", err)
		}
	}
	if n := reader.calls.Load(); n != 1 {
		t.Errorf("three appends to alice's own thread read the owner %d more times, want 0", n-1)
	}
	if n := store.calls.Load(); n != 4 {
		t.Errorf("PutBatchOwned called %d times for four appends, want 4", n)
	}
	if err := appendAs("bob"); runstream.ErrorCodeOf(err) != runstream.CodeNotFound {
		t.Errorf("bob writes to alice's thread: %v, want NOT_FOUND", err)
	}
	rows, err := store.rows.ListThreadEvents(ctx, runevents.ListThreadEventsParams{ThreadID: "t1", Owner: runevents.AnyOwner, Limit: 100})
	if err != nil || len(rows) != 4 {
		t.Fatalf("the thread holds %d rows (%v), want alice's 4", len(rows), err)
	}
	for _, r := range rows {
		if r.UserID != "alice" {
			t.Errorf("row %d is %q's", r.Seq, r.UserID)
		}
	}
}
