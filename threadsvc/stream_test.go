package threadsvc

import (
	"context"
	"errors"
	"strings"
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

// blockingRows is a thread reader whose ListThreadEvents waits for
// release, counts its calls and answers rows seq after+1 … before-1.
type blockingRows struct {
	runevents.ThreadReader
	release chan struct{}
	calls   atomic.Int32
}

func (b *blockingRows) ListThreadEvents(ctx context.Context, p runevents.ListThreadEventsParams) ([]runevents.Record, error) {
	b.calls.Add(1)
	<-b.release
	var recs []runevents.Record
	for seq := p.AfterSeq + 1; seq < p.BeforeSeq && len(recs) < p.Limit; seq++ {
		recs = append(recs, runevents.Record{ThreadID: p.ThreadID, RunID: "r1", Seq: seq, EventType: runevents.EventRunStart,
			Category: runevents.CategoryTrace, Content: []byte(`{}`), Metadata: []byte(`{}`)})
	}
	return recs, nil
}

// The followers of a view catching up on the same range at once share
// one store read of it, and each gets its frames after what its buffer
// held; other views, and later reads, read on their own.
func TestCatchUpsShareOneRangeRead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reader := &blockingRows{release: make(chan struct{})}
		s := New(nil, reader, nil, nil, live.New(live.Config{}), Config{})
		open := func(user string) *ThreadStream {
			st, err := s.OpenStream(t.Context(), user, "t-1", "", "")
			if err != nil {
				t.Fatal(err)
			}
			return st
		}
		const followers = 10
		outs := make([][]byte, followers)
		var wg sync.WaitGroup
		for i := range followers {
			st := open("alice")
			wg.Go(func() {
				out, n, last, _, err := st.ReadRange(t.Context(), []byte("held:"), 2, 5, 100)
				if err != nil || n != 3 || last != 5 {
					t.Errorf("ReadRange = %d rows, last %d, %v; want 3 rows, last 5", n, last, err)
				}
				outs[i] = out
			})
		}
		bob := open("bob")
		var bobOut []byte
		wg.Go(func() { bobOut, _, _, _, _ = bob.ReadRange(t.Context(), nil, 2, 5, 100) })
		synctest.Wait() // every follower waits on a read in flight
		close(reader.release)
		wg.Wait()
		if n := reader.calls.Load(); n != 2 {
			t.Fatalf("%d store reads for %d followers of one view and one of another, want 2", n, followers)
		}
		for i, out := range outs {
			if string(out) != string(outs[0]) || !strings.HasPrefix(string(out), "held:id: 3\n") {
				t.Fatalf("follower %d got %q, want its buffer then the frames of 3…5 as the others", i, out)
			}
		}
		if string(bobOut) != strings.TrimPrefix(string(outs[0]), "held:") {
			t.Errorf("another user's view got %q", bobOut)
		}
		if _, _, _, _, err := open("alice").ReadRange(t.Context(), nil, 2, 5, 100); err != nil || reader.calls.Load() != 3 {
			t.Errorf("a later read: %v after %d reads, want a read of its own", err, reader.calls.Load())
		}
	})
}
