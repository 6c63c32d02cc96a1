package threadsvc_test

import (
	"context"
	"fmt"
	"hash/fnv"
	"testing"
	"time"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/internal/threadtest"
	"github.com/runstream/runstream/runevents"
	"github.com/runstream/runstream/threadsvc"
)

// gatedStore holds the appends of one user until release is closed,
// after saying on in that one began.
type gatedStore struct {
	runevents.Store
	user    string
	in      chan struct{}
	release chan struct{}
}

func (g *gatedStore) PutBatch(ctx context.Context, events []runevents.NewEvent) ([]runevents.Record, error) {
	if len(events) > 0 && events[0].UserID == g.user {
		g.in <- struct{}{}
		<-g.release
	}
	return g.Store.PutBatch(ctx, events)
}

// appendAsync appends startEvent to threadID for user on a goroutine of
// its own and returns the channel of its error.
func appendAsync(ctx context.Context, svc *threadsvc.Service, user, threadID string) <-chan error {
	done := make(chan error, 1)
	go func() {
		ev := startEvent()
		ev.ThreadID = threadID
		_, err := svc.Append(ctx, user, threadID, []runevents.NewEvent{ev})
		done <- err
	}()
	return done
}

// Two users' first writes to a new thread: the second one's check waits
// for the first one's write, and finds the thread another user's. Before,
// both passed the check while the thread was empty, and both owned it.
func TestFirstWritesToANewThreadHaveOneOwner(t *testing.T) {
	t.Parallel()
	g := &gatedStore{user: "alice", in: make(chan struct{}, 1), release: make(chan struct{})}
	svc := threadtest.ServiceOver(t, func(s runevents.Store) runevents.Store { g.Store = s; return g },
		func(r runevents.ThreadReader) runevents.ThreadReader { return r })
	ctx := t.Context()
	alice := appendAsync(ctx, svc, "alice", "t1")
	<-g.in // alice passed the check and is writing
	bob := appendAsync(ctx, svc, "bob", "t1")
	var bobErr error
	bobDone := false
	select {
	case bobErr = <-bob: // without the lock bob gets here, alice still writing
		bobDone = true
	case <-time.After(200 * time.Millisecond): // bob waits for alice
	}
	close(g.release)
	if err := <-alice; err != nil {
		t.Fatalf("alice's first write: %v", err)
	}
	if !bobDone {
		bobErr = <-bob
	}
	if runstream.ErrorCodeOf(bobErr) != runstream.CodeNotFound {
		t.Fatalf("bob's write to the thread alice was creating: %v, want NOT_FOUND (one owner)", bobErr)
	}
}

// A write to a thread whose first row is the writer's holds no lock while
// it writes: another user's first write to a thread that shares its lock
// goes on while it is still writing.
func TestOwnThreadWriteHoldsNoLock(t *testing.T) {
	t.Parallel()
	g := &gatedStore{user: "alice", in: make(chan struct{}, 1), release: make(chan struct{})}
	svc := threadtest.ServiceOver(t, func(s runevents.Store) runevents.Store { g.Store = s; return g },
		func(r runevents.ThreadReader) runevents.ThreadReader { return r })
	ctx := t.Context()
	first := startEvent()
	first.UserID, first.Category = "alice", runevents.CategoryTrace
	if _, err := g.Store.PutBatch(ctx, []runevents.NewEvent{first}); err != nil { // alice's thread, written past the gate
		t.Fatal(err)
	}
	stripe := func(id string) uint32 { h := fnv.New32a(); h.Write([]byte(id)); return h.Sum32() % 64 }
	other := ""
	for i := 0; other == ""; i++ {
		if id := fmt.Sprintf("u%d", i); stripe(id) == stripe("t1") {
			other = id
		}
	}
	alice := appendAsync(ctx, svc, "alice", "t1")
	<-g.in // alice passed the check and is writing
	bob := appendAsync(ctx, svc, "bob", other)
	select {
	case err := <-bob:
		if err != nil {
			t.Errorf("bob's first write to %s: %v", other, err)
		}
	case <-time.After(10 * time.Second):
		t.Errorf("bob's first write to %s, which shares t1's lock, waited for alice's write to her own thread", other)
	}
	close(g.release)
	if err := <-alice; err != nil {
		t.Fatalf("alice's write: %v", err)
	}
}
