package threadsvc

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/runstream/runstream/live"
	"github.com/runstream/runstream/runevents"
)

// blockingHead is a thread reader whose LastThreadSeq waits for release
// and counts its calls.
type blockingHead struct {
	runevents.ThreadReader
	release chan struct{}
	calls   atomic.Int32
	head    int64
}

func (b *blockingHead) LastThreadSeq(ctx context.Context, threadID string) (int64, error) {
	b.calls.Add(1)
	<-b.release
	return b.head, nil
}

// The followers of a thread opening at once share one read of its head,
// and each subscribes after it.
func TestOpenStreamsShareOneHeadRead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reader := &blockingHead{release: make(chan struct{}), head: 41}
		s := New(nil, reader, nil, nil, live.New(live.Config{}), Config{})
		const openings = 20
		streams := make([]*ThreadStream, openings)
		var wg sync.WaitGroup
		for i := range openings {
			wg.Go(func() {
				st, err := s.OpenStream(t.Context(), "alice", "t-1", "", "")
				if err != nil {
					t.Errorf("OpenStream: %v", err)
				}
				streams[i] = st
			})
		}
		synctest.Wait() // every opening waits on the read in flight
		close(reader.release)
		wg.Wait()
		if n := reader.calls.Load(); n != 1 {
			t.Fatalf("%d head reads for %d simultaneous openings, want 1", n, openings)
		}
		for i, st := range streams {
			if st == nil || st.head != 41 {
				t.Fatalf("stream %d: %+v, want head 41", i, st)
			}
		}
		// A later opening reads the head again.
		reader.head = 50
		st, err := s.OpenStream(t.Context(), "alice", "t-1", "", "")
		if err != nil || st.head != 50 || reader.calls.Load() != 2 {
			t.Fatalf("later OpenStream: head %v, err %v, %d reads; want head 50 from a second read", st, err, reader.calls.Load())
		}
	})
}

// An opening whose request ends stops waiting for the shared read; the
// read goes on for the others.
func TestOpenStreamStopsWaitingWhenItsRequestEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reader := &blockingHead{release: make(chan struct{}), head: 7}
		s := New(nil, reader, nil, nil, live.New(live.Config{}), Config{})
		ctx, cancel := context.WithCancel(t.Context())
		first := make(chan error, 1)
		go func() {
			_, err := s.OpenStream(ctx, "alice", "t-1", "", "")
			first <- err
		}()
		var second *ThreadStream
		done := make(chan struct{})
		go func() {
			defer close(done)
			var err error
			if second, err = s.OpenStream(t.Context(), "bob", "t-1", "", ""); err != nil {
				t.Errorf("second OpenStream: %v", err)
			}
		}()
		synctest.Wait()
		cancel()
		if err := <-first; !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled OpenStream: %v, want context.Canceled", err)
		}
		close(reader.release)
		<-done
		if second == nil || second.head != 7 || reader.calls.Load() != 1 {
			t.Fatalf("second stream %+v after %d reads, want head 7 from the one read", second, reader.calls.Load())
		}
	})
}
