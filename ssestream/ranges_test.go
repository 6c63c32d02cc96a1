package ssestream

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/runstream/runstream/live"
	"github.com/runstream/runstream/sse"
)

// rangeSource is a RangeSource of stored frames at the given seqs (gaps
// between them, as a filtered view has), whose head is the last. It
// records the ranges read and how many reads ran at once, and fails the
// range that starts after failAfter (when positive).
type rangeSource struct {
	hub       *live.Hub
	seqs      []int64
	failAfter int64

	mu         sync.Mutex
	ranges     [][2]int64 // (after, through] of each ReadRange
	running    int
	maxRunning int
	readsAfter []int64 // of each ReadAfter
	// second is closed when a second read runs alongside the first, which
	// waits for it (a follower that read one range at a time would make
	// the first wait out its timeout).
	second chan struct{}
}

func newRangeSource(seqs []int64) *rangeSource {
	return &rangeSource{hub: live.New(live.Config{}), seqs: seqs, second: make(chan struct{})}
}

func frameOf(seq int64) string {
	return fmt.Sprintf("id: %d\nevent: e\ndata: {\"seq\":%d}\n\n", seq, seq)
}

func (s *rangeSource) Subscribe(cursor int64) *live.Subscription { return s.hub.Subscribe("k", cursor) }
func (s *rangeSource) Shows(live.Event) bool                     { return true }
func (s *rangeSource) Dense() bool                               { return false }
func (s *rangeSource) Kind() string                              { return "test" }
func (s *rangeSource) Head() int64                               { return s.seqs[len(s.seqs)-1] }

func (s *rangeSource) End(_ context.Context, cursor int64) ([]byte, bool, bool, error) {
	return nil, cursor >= s.Head(), false, nil
}

func (s *rangeSource) ReadAfter(_ context.Context, buf []byte, after int64, limit int) ([]byte, int, int64, bool, error) {
	s.mu.Lock()
	s.readsAfter = append(s.readsAfter, after)
	s.mu.Unlock()
	return s.frames(buf, after, s.Head(), limit)
}

func (s *rangeSource) ReadRange(_ context.Context, buf []byte, after, through int64, limit int) ([]byte, int, int64, bool, error) {
	s.mu.Lock()
	s.ranges = append(s.ranges, [2]int64{after, through})
	s.running++
	s.maxRunning = max(s.maxRunning, s.running)
	first := len(s.ranges) == 1
	if s.running == 2 && s.maxRunning == 2 && len(s.ranges) == 2 {
		close(s.second)
	}
	s.mu.Unlock()
	if first {
		select {
		case <-s.second:
		case <-time.After(5 * time.Second):
		}
	}
	defer func() {
		s.mu.Lock()
		s.running--
		s.mu.Unlock()
	}()
	if s.failAfter > 0 && after == s.failAfter {
		return buf, 0, after, false, errors.New("store down")
	}
	if int64(limit) < through-after {
		return buf, 0, after, false, fmt.Errorf("limit %d for the range (%d, %d]", limit, after, through)
	}
	return s.frames(buf, after, through, limit)
}

func (s *rangeSource) frames(buf []byte, after, through int64, limit int) ([]byte, int, int64, bool, error) {
	n, last := 0, after
	for _, seq := range s.seqs {
		if seq > after && seq <= through && n < limit {
			buf = append(buf, frameOf(seq)...)
			n, last = n+1, seq
		}
	}
	return buf, n, last, false, nil
}

// A follower far behind the head of a RangeSource reads the ranges up to
// it two at a time, contiguous from its cursor, widened where they come
// back sparse, and writes every event once, in order.
func TestCatchUpReadsRangesTwoAtATime(t *testing.T) {
	t.Parallel()
	var seqs []int64
	for seq := int64(1); seq <= 100; seq++ {
		seqs = append(seqs, seq) // dense
	}
	for seq := int64(101); seq <= 400; seq += 30 {
		seqs = append(seqs, seq) // sparse: one in 30
	}
	for seq := int64(401); seq <= 460; seq++ {
		seqs = append(seqs, seq)
	}
	src := newRangeSource(seqs)
	set := NewSet(Config{ReplayPage: 10})
	rec := httptest.NewRecorder()
	if err := set.Serve(rec, httptest.NewRequestWithContext(t.Context(), "GET", "/", nil), src, 5, Options{}); err != nil {
		t.Fatal(err)
	}
	retry, err := sse.AppendRetry(nil, 3*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var want strings.Builder
	want.Write(retry)
	for _, seq := range seqs[5:] {
		want.WriteString(frameOf(seq))
	}
	if got := rec.Body.String(); got != want.String() {
		t.Fatalf("body:\n%s\nwant every frame after 5 once, in order", got)
	}
	src.mu.Lock()
	defer src.mu.Unlock()
	// Two reads run at once: they may start in either order.
	slices.SortFunc(src.ranges, func(a, b [2]int64) int { return cmp.Compare(a[0], b[0]) })
	next, widest := int64(5), int64(0)
	for _, r := range src.ranges {
		if r[0] != next || r[1] <= r[0] {
			t.Fatalf("ranges %v: not contiguous from the cursor 5", src.ranges)
		}
		next, widest = r[1], max(widest, r[1]-r[0])
	}
	if next != src.Head() {
		t.Errorf("ranges %v end at %d, want the head %d", src.ranges, next, src.Head())
	}
	if src.maxRunning != 2 {
		t.Errorf("at most %d range reads at once, want 2", src.maxRunning)
	}
	if widest <= 10 || widest > 80 {
		t.Errorf("widest range %d seqs, want it widened from 10 in the sparse part, to at most 80", widest)
	}
	if len(src.readsAfter) == 0 || src.readsAfter[0] != src.Head() {
		t.Errorf("reads after the ranges: %v, want the first after the head %d", src.readsAfter, src.Head())
	}
}

// A follower near the head reads as without ranges; a range that fails
// ends the stream after the ranges before it, once the reads in flight
// have returned.
func TestCatchUpRangesNearTheHeadAndOnErrors(t *testing.T) {
	t.Parallel()
	var seqs []int64
	for seq := int64(1); seq <= 100; seq++ {
		seqs = append(seqs, seq)
	}
	near := newRangeSource(seqs)
	rec := httptest.NewRecorder()
	if err := NewSet(Config{ReplayPage: 50}).Serve(rec, httptest.NewRequestWithContext(t.Context(), "GET", "/", nil), near, 0, Options{}); err != nil {
		t.Fatal(err)
	}
	if len(near.ranges) != 0 || !strings.HasSuffix(rec.Body.String(), frameOf(100)) {
		t.Errorf("100 events behind with pages of 50: ranges %v, body ends %q; want no ranges, every event", near.ranges, rec.Body.String()[max(0, rec.Body.Len()-40):])
	}

	failing := newRangeSource(seqs)
	failing.failAfter = 30
	rec = httptest.NewRecorder()
	if err := NewSet(Config{ReplayPage: 10}).Serve(rec, httptest.NewRequestWithContext(t.Context(), "GET", "/", nil), failing, 0, Options{}); err != nil {
		t.Fatal(err)
	}
	failing.mu.Lock()
	defer failing.mu.Unlock()
	body := rec.Body.String()
	if !strings.HasSuffix(body, frameOf(30)) || failing.running != 0 || len(failing.readsAfter) != 0 {
		t.Errorf("a failed range after 30: body ends %q, %d reads still running, reads after %v; want the frames to 30, none running, no more reads",
			body[max(0, len(body)-40):], failing.running, failing.readsAfter)
	}
}
