package live

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

func events(from, to int64) []Event {
	var out []Event
	for s := from; s <= to; s++ {
		out = append(out, Event{Seq: s, Frame: []byte(fmt.Sprintf("id: %d\n\n", s))})
	}
	return out
}

func seqsOf(evs []Event) []int64 {
	out := make([]int64, len(evs))
	for i, e := range evs {
		out[i] = e.Seq
	}
	return out
}

func TestPublishDeliversToEverySubscriber(t *testing.T) {
	t.Parallel()
	h := New(Config{})
	a, b := h.Subscribe("s", 0), h.Subscribe("s", 0)
	other := h.Subscribe("t", 0)
	h.Publish("s", events(1, 3))
	for _, sub := range []*Subscription{a, b} {
		select {
		case <-sub.Ready():
		default:
			t.Fatal("subscriber not signalled")
		}
		got, cut := sub.Take()
		if fmt.Sprint(seqsOf(got)) != "[1 2 3]" || cut {
			t.Errorf("got %v cut=%v", seqsOf(got), cut)
		}
	}
	if got, _ := other.Take(); len(got) != 0 {
		t.Errorf("another stream's subscriber got %v", seqsOf(got))
	}
	// Already published seqs are not published again.
	h.Publish("s", events(2, 4))
	if got, _ := a.Take(); fmt.Sprint(seqsOf(got)) != "[4]" {
		t.Errorf("republish gave %v", seqsOf(got))
	}
}

func TestSlowSubscriberIsCutWithoutBlocking(t *testing.T) {
	t.Parallel()
	h := New(Config{BufferEvents: 10, BufferBytes: 1 << 20})
	slow, fast := h.Subscribe("s", 0), h.Subscribe("s", 0)
	var fastGot []int64
	for s := int64(1); s <= 1000; s++ {
		h.Publish("s", events(s, s)) // never blocks, whatever slow does
		got, cut := fast.Take()
		if cut {
			t.Fatal("the fast subscriber was cut")
		}
		fastGot = append(fastGot, seqsOf(got)...)
	}
	if len(fastGot) != 1000 {
		t.Errorf("fast subscriber got %d events", len(fastGot))
	}
	got, cut := slow.Take()
	if !cut || len(got) != 0 {
		t.Errorf("slow subscriber: %d events, cut=%v; want the cut and no events", len(got), cut)
	}
	// After the cut, the subscription works again.
	h.Publish("s", events(1001, 1001))
	if got, cut := slow.Take(); cut || fmt.Sprint(seqsOf(got)) != "[1001]" {
		t.Errorf("after the cut: %v cut=%v", seqsOf(got), cut)
	}
}

// TestOnePublicationIsTakenWhole: a publication into an empty buffer is
// taken whole past the budget in events (a large group commit of small
// events does not send the follower to the store); the budget in events
// cuts what piles up behind a follower that has not taken its buffer, and
// the budget in bytes any publication past it.
func TestOnePublicationIsTakenWhole(t *testing.T) {
	t.Parallel()
	h := New(Config{BufferEvents: 10, BufferBytes: 1000})
	sub := h.Subscribe("s", 0)
	big := make([]Event, 50)
	for i := range big {
		big[i] = Event{Seq: int64(i + 1), Frame: make([]byte, 10)}
	}
	h.Publish("s", big) // 50 events, 500 bytes
	if got, cut := sub.Take(); cut || len(got) != 50 {
		t.Fatalf("got %d events cut=%v; want the 50 whole", len(got), cut)
	}
	h.Publish("s", events(51, 60))
	h.Publish("s", events(61, 61)) // 11 events not taken: past the budget
	if got, cut := sub.Take(); !cut || len(got) != 0 {
		t.Errorf("got %v cut=%v; want the cut: 11 events piled up in a budget of 10", seqsOf(got), cut)
	}
	h.Publish("s", []Event{{Seq: 62, Frame: make([]byte, 1001)}}) // past the budget in bytes
	if got, cut := sub.Take(); !cut || len(got) != 0 {
		t.Errorf("got %v cut=%v; want the cut: 1,001 bytes in a budget of 1,000", seqsOf(got), cut)
	}
}

// TestSharedBuffersStayApart: subscriptions that took the same
// publication share its slice; what each appends after it stays its own.
func TestSharedBuffersStayApart(t *testing.T) {
	t.Parallel()
	h := New(Config{})
	a, b := h.Subscribe("s", 0), h.Subscribe("s", 0)
	group := make([]Event, 3, 10) // spare capacity behind the shared events
	for i := range group {
		group[i] = Event{Seq: int64(i + 1), Frame: []byte{'x'}}
	}
	h.mu.Lock()
	a.push(group, frameBytes(group), 100, 1000)
	b.push(group, frameBytes(group), 100, 1000)
	a.push([]Event{{Seq: 4, Frame: []byte("a")}}, 1, 100, 1000)
	b.push([]Event{{Seq: 4, Frame: []byte("b")}}, 1, 100, 1000)
	h.mu.Unlock()
	gotA, _ := a.Take()
	gotB, _ := b.Take()
	if len(gotA) != 4 || len(gotB) != 4 || string(gotA[3].Frame) != "a" || string(gotB[3].Frame) != "b" {
		t.Errorf("a took %v %q, b took %v %q; want each its own fourth event", seqsOf(gotA), gotA[len(gotA)-1].Frame, seqsOf(gotB), gotB[len(gotB)-1].Frame)
	}
}

func TestByteBudgetCuts(t *testing.T) {
	t.Parallel()
	h := New(Config{BufferEvents: 1000, BufferBytes: 100})
	sub := h.Subscribe("s", 0)
	h.Publish("s", []Event{{Seq: 1, Frame: make([]byte, 60)}})
	h.Publish("s", []Event{{Seq: 2, Frame: make([]byte, 60)}})
	if _, cut := sub.Take(); !cut {
		t.Error("120 bytes fit in a 100-byte budget")
	}
}

func TestCloseUnregisters(t *testing.T) {
	t.Parallel()
	h := New(Config{})
	sub := h.Subscribe("s", 0)
	if h.Followed("s") != 1 {
		t.Fatal("not followed")
	}
	sub.Close()
	sub.Close()
	if h.Followed("s") != 0 {
		t.Error("still followed after Close")
	}
	h.Publish("s", events(1, 1)) // no panic, nobody to deliver to
}

// countingPoll serves a growing stream and counts queries per key.
type countingPoll struct {
	mu      sync.Mutex
	stored  map[string]int64 // newest seq per stream
	queries map[string]int
}

func (p *countingPoll) poll(_ context.Context, key string, after int64) ([]Event, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.queries[key]++
	return events(after+1, p.stored[key]), nil
}

func (p *countingPoll) count(key string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.queries[key]
}

func TestPollIsSharedPerStream(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := &countingPoll{stored: map[string]int64{"followed": 3, "idle": 9}, queries: map[string]int{}}
		h := New(Config{Poll: p.poll, PollInterval: 800 * time.Millisecond})
		go h.Run(t.Context()) // until the test ends

		subs := make([]*Subscription, 50)
		for i := range subs {
			subs[i] = h.Subscribe("followed", 0)
		}
		time.Sleep(800 * time.Millisecond)
		synctest.Wait()
		if n := p.count("followed"); n != 1 {
			t.Errorf("one tick with 50 followers made %d queries, want 1", n)
		}
		if n := p.count("idle"); n != 0 {
			t.Errorf("a stream without followers was polled %d times", n)
		}
		for _, sub := range subs {
			if got, _ := sub.Take(); fmt.Sprint(seqsOf(got)) != "[1 2 3]" {
				t.Fatalf("polled events: %v", seqsOf(got))
			}
		}
		time.Sleep(800 * time.Millisecond)
		synctest.Wait()
		if n := p.count("followed"); n != 2 {
			t.Errorf("two ticks made %d queries", n)
		}
		for _, sub := range subs {
			sub.Close()
		}
		time.Sleep(8 * time.Second)
		synctest.Wait()
		if n := p.count("followed"); n != 2 {
			t.Errorf("polled %d times after the last follower left, want 2", n)
		}
	})
}

func TestWakePollsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := &countingPoll{stored: map[string]int64{"s": 1}, queries: map[string]int{}}
		h := New(Config{Poll: p.poll, PollInterval: time.Hour})
		go h.Run(t.Context()) // until the test ends
		sub := h.Subscribe("s", 0)
		defer sub.Close()
		h.Wake("s")
		synctest.Wait()
		if got, _ := sub.Take(); fmt.Sprint(seqsOf(got)) != "[1]" {
			t.Errorf("after Wake: %v", seqsOf(got))
		}
		h.Wake("nobody") // a stream without followers is not read
		synctest.Wait()
		if p.count("nobody") != 0 {
			t.Error("woke a stream without followers")
		}
	})
}

// TestLateSubscriberDoesNotStarveOthers: a follower that joins with a
// cursor ahead of what the hub delivered must not make the hub drop the
// in-flight events the other followers still need; it gets only what
// follows its own cursor.
func TestLateSubscriberDoesNotStarveOthers(t *testing.T) {
	t.Parallel()
	h := New(Config{})
	early := h.Subscribe("s", 10)
	late := h.Subscribe("s", 12) // it read seqs 11 and 12 from the store
	h.Publish("s", events(11, 13))
	if got, _ := early.Take(); fmt.Sprint(seqsOf(got)) != "[11 12 13]" {
		t.Errorf("early follower got %v, want [11 12 13]", seqsOf(got))
	}
	if got, _ := late.Take(); fmt.Sprint(seqsOf(got)) != "[13]" {
		t.Errorf("late follower got %v, want [13]: it read 11 and 12 from the store", seqsOf(got))
	}
}

// TestOutOfOrderPublishesAreReordered: when a later append publishes
// before an earlier one, the hub holds it and asks the store once, rather
// than handing every follower a gap; the late publisher adds nothing.
func TestOutOfOrderPublishesAreReordered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := &countingPoll{stored: map[string]int64{"s": 3}, queries: map[string]int{}}
		h := New(Config{Poll: p.poll, PollInterval: time.Hour})
		go h.Run(t.Context()) // until the test ends
		subs := []*Subscription{h.Subscribe("s", 0), h.Subscribe("s", 0)}
		h.Publish("s", events(1, 1))
		h.Publish("s", events(3, 3)) // seq 2's publisher is late
		synctest.Wait()
		for _, sub := range subs {
			if got, cut := sub.Take(); fmt.Sprint(seqsOf(got)) != "[1 2 3]" || cut {
				t.Fatalf("after the poll: %v cut=%v, want [1 2 3]", seqsOf(got), cut)
			}
		}
		if n := p.count("s"); n != 1 {
			t.Errorf("the gap made %d store reads, want 1 for all followers", n)
		}
		h.Publish("s", events(2, 2)) // the late publisher
		for _, sub := range subs {
			if got, cut := sub.Take(); len(got) != 0 || cut {
				t.Errorf("after the late publisher: %v cut=%v, want nothing", seqsOf(got), cut)
			}
		}
	})
}

// TestLatePublisherReleasesHeldEvents: held events wake the poll loop at
// most once per PollInterval; within it, the late publisher releases what
// was held.
func TestLatePublisherReleasesHeldEvents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := &countingPoll{stored: map[string]int64{"s": 3}, queries: map[string]int{}}
		h := New(Config{Poll: p.poll, PollInterval: time.Hour})
		go h.Run(t.Context()) // until the test ends
		sub := h.Subscribe("s", 0)
		h.Publish("s", events(1, 1))
		h.Publish("s", events(3, 3)) // seq 2's publisher is late: the poll reads it
		synctest.Wait()
		if got, cut := sub.Take(); fmt.Sprint(seqsOf(got)) != "[1 2 3]" || cut {
			t.Fatalf("after the first gap: %v cut=%v, want [1 2 3]", seqsOf(got), cut)
		}
		h.Publish("s", events(5, 5)) // seq 4's publisher is late too
		synctest.Wait()
		if got, cut := sub.Take(); len(got) != 0 || cut {
			t.Fatalf("before seq 4: %v cut=%v, want 5 held", seqsOf(got), cut)
		}
		h.Publish("s", events(4, 4))
		if got, cut := sub.Take(); fmt.Sprint(seqsOf(got)) != "[4 5]" || cut {
			t.Errorf("after seq 4: %v cut=%v, want [4 5]", seqsOf(got), cut)
		}
		if n := p.count("s"); n != 1 {
			t.Errorf("%d store reads, want only the first gap's", n)
		}
	})
}

// TestPermanentGapsCannotSpin: a stream whose store lacks seqs for good,
// published to without pause, costs at most one poll per PollInterval
// beyond the periodic one, and the other streams keep their poll rate;
// its follower gets every stored event once, in order.
func TestPermanentGapsCannotSpin(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const interval = 100 * time.Millisecond
		missing := func(seq int64) bool { return seq%10 == 5 } // deleted, or never framed
		var (
			mu      sync.Mutex
			stored  int64
			queries = map[string]int{}
		)
		poll := func(_ context.Context, key string, after int64) ([]Event, error) {
			mu.Lock()
			defer mu.Unlock()
			queries[key]++
			if key != "gappy" {
				return nil, nil
			}
			var out []Event
			for _, e := range events(after+1, stored) {
				if !missing(e.Seq) {
					out = append(out, e)
				}
			}
			return out, nil
		}
		h := New(Config{Poll: poll, PollInterval: interval})
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go h.Run(ctx)
		gappy, other := h.Subscribe("gappy", 0), h.Subscribe("other", 0)
		defer gappy.Close()
		defer other.Close()

		const ticks = 10
		var got []int64
		for seq := int64(1); seq <= ticks*int64(interval/time.Millisecond); seq++ {
			mu.Lock()
			stored = seq
			mu.Unlock()
			if !missing(seq) {
				h.Publish("gappy", events(seq, seq))
			}
			time.Sleep(time.Millisecond)
			evs, cut := gappy.Take()
			if cut {
				t.Fatalf("cut at seq %d", seq)
			}
			got = append(got, seqsOf(evs)...)
		}
		time.Sleep(interval)
		synctest.Wait()
		evs, _ := gappy.Take()
		got = append(got, seqsOf(evs)...)
		cancel()
		synctest.Wait()

		var want []int64
		for seq := int64(1); seq <= stored; seq++ {
			if !missing(seq) {
				want = append(want, seq)
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("the follower got %d events, want %d, each once in order", len(got), len(want))
		}
		mu.Lock()
		defer mu.Unlock()
		if n := queries["gappy"]; n > 2*(ticks+1) {
			t.Errorf("%d gaps in %d intervals made %d polls, want at most %d", ticks*10, ticks+1, n, 2*(ticks+1))
		}
		if n := queries["other"]; n < ticks {
			t.Errorf("the other stream was polled %d times in %d intervals", n, ticks+1)
		}
	})
}

func TestGapFilledByThePoll(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := &countingPoll{stored: map[string]int64{"s": 3}, queries: map[string]int{}}
		h := New(Config{Poll: p.poll, PollInterval: time.Hour})
		go h.Run(t.Context()) // until the test ends
		sub := h.Subscribe("s", 0)
		h.Publish("s", events(3, 3)) // 1 and 2 were appended by another instance
		synctest.Wait()
		if got, _ := sub.Take(); fmt.Sprint(seqsOf(got)) != "[1 2 3]" {
			t.Errorf("got %v, want the poll to fill 1 and 2 before 3", seqsOf(got))
		}
	})
}

func TestViewsDeliverWithGaps(t *testing.T) {
	t.Parallel()
	h := New(Config{Poll: func(context.Context, string, int64) ([]Event, error) { return nil, nil }})
	sub := h.SubscribeView("s?user=a", 0)
	h.Publish("s?user=a", events(3, 3))
	h.Publish("s?user=a", events(7, 7))
	if got, _ := sub.Take(); fmt.Sprint(seqsOf(got)) != "[3 7]" {
		t.Errorf("view got %v, want [3 7] at once", seqsOf(got))
	}
}

// TestWithoutPollGapsCutTheFollowers: without a poll nothing fills a gap
// but the followers, who read the store: their subscriptions are cut
// rather than handed events past a missing seq.
func TestWithoutPollGapsCutTheFollowers(t *testing.T) {
	t.Parallel()
	h := New(Config{})
	sub := h.Subscribe("s", 0)
	h.Publish("s", events(2, 2))
	if got, cut := sub.Take(); !cut || len(got) != 0 {
		t.Errorf("got %v cut=%v, want a cut: without a poll nothing can fill the gap", seqsOf(got), cut)
	}
	h.Publish("s", events(3, 3))
	if got, cut := sub.Take(); cut || fmt.Sprint(seqsOf(got)) != "[3]" {
		t.Errorf("then %v cut=%v, want [3]", seqsOf(got), cut)
	}
}

// TestSubscriberPastTheEndDoesNotStarveLaterOnes: a first follower whose
// seq is past the stored end must not make the hub drop what later
// followers need.
func TestSubscriberPastTheEndDoesNotStarveLaterOnes(t *testing.T) {
	t.Parallel()
	h := New(Config{})
	bogus := h.Subscribe("s", 1_000_000)
	defer bogus.Close()
	later := h.Subscribe("s", 5)
	h.Publish("s", events(6, 7))
	if got, _ := later.Take(); fmt.Sprint(seqsOf(got)) != "[6 7]" {
		t.Errorf("later follower got %v, want [6 7]", seqsOf(got))
	}
}

// TestSlowPollTimesOut: one stream's hung store read gives up after
// PollTimeout, so the loop goes on to the other streams.
func TestSlowPollTimesOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var fastPolls atomic.Int64
		poll := func(ctx context.Context, key string, after int64) ([]Event, error) {
			if key == "hung" {
				<-ctx.Done() // a query that never answers
				return nil, ctx.Err()
			}
			fastPolls.Add(1)
			return nil, nil
		}
		h := New(Config{Poll: poll, PollInterval: time.Hour, PollTimeout: time.Second})
		go h.Run(t.Context()) // until the test ends
		hung, fast := h.Subscribe("hung", 0), h.Subscribe("fast", 0)
		defer hung.Close()
		defer fast.Close()
		h.Wake("hung")
		synctest.Wait()
		h.Wake("fast")
		time.Sleep(time.Second)
		synctest.Wait()
		if n := fastPolls.Load(); n != 1 {
			t.Errorf("the other stream was polled %d times after the hung poll's timeout, want 1", n)
		}
	})
}

// TestSubscriptionGetsNothingAtOrBelowItsFrontier: events at or below the
// seq a subscription started after are neither buffered for it nor cut
// it, whatever another follower of the stream needs.
func TestSubscriptionGetsNothingAtOrBelowItsFrontier(t *testing.T) {
	t.Parallel()
	h := New(Config{BufferEvents: 10})
	low, high := h.Subscribe("s", 0), h.Subscribe("s", 20)
	h.Publish("s", events(1, 20)) // 20 events: more than the buffer holds
	select {
	case <-high.Ready():
		t.Error("the follower at seq 20 was signalled for seqs 1 to 20")
	default:
	}
	if got, cut := high.Take(); cut || len(got) != 0 {
		t.Errorf("the follower at seq 20 got %v cut=%v; want nothing", seqsOf(got), cut)
	}
	if got, cut := low.Take(); cut || len(got) != 20 {
		t.Errorf("the follower at seq 0 got %d events cut=%v; want the publication whole into its empty buffer", len(got), cut)
	}
	h.Publish("s", events(21, 21))
	for _, sub := range []*Subscription{low, high} {
		if got, cut := sub.Take(); cut || fmt.Sprint(seqsOf(got)) != "[21]" {
			t.Errorf("after seq 21: %v cut=%v, want [21]", seqsOf(got), cut)
		}
	}
}

// pagedPoll serves a stream a page of at most 500 events at a time, as
// streams.PollPage, and records the lowest seq it was asked to read after.
type pagedPoll struct {
	countingPoll
	lowest int64
}

func newPagedPoll(stored map[string]int64) *pagedPoll {
	return &pagedPoll{countingPoll: countingPoll{stored: stored, queries: map[string]int{}}, lowest: math.MaxInt64}
}

func (p *pagedPoll) poll(ctx context.Context, key string, after int64) ([]Event, error) {
	evs, err := p.countingPoll.poll(ctx, key, after)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.lowest = min(p.lowest, after)
	return evs[:min(len(evs), 500)], err
}

func (p *pagedPoll) lowestAfter() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lowest
}

// TestOldViewCursorDoesNotRereadHistory: view followers resuming from an
// old cursor, whether they leave at once or stay, make the hub neither
// read the view's history nor cut a follower at the head; they replay
// from the store themselves.
func TestOldViewCursorDoesNotRereadHistory(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newPagedPoll(map[string]int64{"v": 10_000})
		h := New(Config{Poll: p.poll, PollInterval: 800 * time.Millisecond})
		go h.Run(t.Context()) // until the test ends
		head := h.SubscribeView("v", 10_000)
		defer head.Close()
		h.SubscribeView("v", 0).Close() // Last-Event-ID: 0, then gone (a 429, say)
		time.Sleep(800 * time.Millisecond)
		synctest.Wait()

		p.mu.Lock()
		p.stored["v"] = 10_001
		p.mu.Unlock()
		h.Publish("v", events(10_001, 10_001))
		old := h.SubscribeView("v", 0) // another old cursor, which stays
		defer old.Close()
		var headGot []int64
		for range 25 {
			time.Sleep(800 * time.Millisecond)
			synctest.Wait()
			got, cut := head.Take()
			if cut {
				t.Fatal("the follower at the head was cut")
			}
			headGot = append(headGot, seqsOf(got)...)
			if got, cut := old.Take(); cut || len(got) != 0 {
				t.Fatalf("the old-cursor follower got %d events, cut=%v; it reads the history from the store", len(got), cut)
			}
		}
		if fmt.Sprint(headGot) != "[10001]" {
			t.Errorf("the follower at the head got %v, want [10001]", headGot)
		}
		if low := p.lowestAfter(); low < 10_000 {
			t.Errorf("the hub read the view after seq %d, below its followers' seq 10000", low)
		}
	})
}

// TestOldViewCursorNeverCutsHeadFollowers: while a view has delivered
// nothing, the hub cannot tell an old cursor from a head one past the
// stored end, and reads the view after the lowest; what it reads goes to
// no follower past it, which is never cut by it.
func TestOldViewCursorNeverCutsHeadFollowers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newPagedPoll(map[string]int64{"v": 10_000})
		h := New(Config{Poll: p.poll, PollInterval: 800 * time.Millisecond})
		go h.Run(t.Context()) // until the test ends
		head := h.SubscribeView("v", 10_000)
		defer head.Close()
		old := h.SubscribeView("v", 0)
		defer old.Close()
		for range 25 {
			time.Sleep(800 * time.Millisecond)
			synctest.Wait()
			if got, cut := head.Take(); cut || len(got) != 0 {
				t.Fatalf("the follower at the head got %d old events, cut=%v", len(got), cut)
			}
			old.Take()
		}
		p.mu.Lock()
		p.stored["v"] = 10_001
		p.mu.Unlock()
		h.Publish("v", events(10_001, 10_001))
		if got, cut := head.Take(); cut || fmt.Sprint(seqsOf(got)) != "[10001]" {
			t.Errorf("the follower at the head got %v cut=%v, want [10001]", seqsOf(got), cut)
		}
	})
}

// TestWakeForDeliveredSeqIsIgnored: a wake-up whose seq the hub already
// delivered, as the instance's own NOTIFY, reads nothing; one with a new
// seq reads the store.
func TestWakeForDeliveredSeqIsIgnored(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := &countingPoll{stored: map[string]int64{"s": 3}, queries: map[string]int{}}
		h := New(Config{Poll: p.poll, PollInterval: time.Hour})
		go h.Run(t.Context()) // until the test ends
		sub := h.Subscribe("s", 0)
		defer sub.Close()
		h.Publish("s", events(1, 3)) // local appends, delivered
		for seq := range int64(4) {
			h.WakeSeq("s", seq) // their NOTIFYs, and an older one
		}
		synctest.Wait()
		if n := p.count("s"); n != 0 {
			t.Errorf("wake-ups for delivered seqs made %d store reads, want 0", n)
		}
		p.mu.Lock()
		p.stored["s"] = 4
		p.mu.Unlock()
		h.WakeSeq("s", 4) // another instance appended seq 4
		synctest.Wait()
		if n := p.count("s"); n != 1 {
			t.Errorf("a wake-up for a new seq made %d store reads, want 1", n)
		}
		if got, _ := sub.Take(); fmt.Sprint(seqsOf(got)) != "[1 2 3 4]" {
			t.Errorf("got %v, want [1 2 3 4]", seqsOf(got))
		}
	})
}

// TestWakesWhileBusyQueueOnePoll: a stream waits in the wake-up queue at
// most once, however often it is woken while the loop is busy.
func TestWakesWhileBusyQueueOnePoll(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		block := make(chan struct{})
		p := &countingPoll{stored: map[string]int64{"s": 3}, queries: map[string]int{}}
		poll := func(ctx context.Context, key string, after int64) ([]Event, error) {
			if key == "busy" {
				<-block
			}
			return p.poll(ctx, key, after)
		}
		h := New(Config{Poll: poll, PollInterval: time.Hour})
		go h.Run(t.Context()) // until the test ends
		busy, s := h.Subscribe("busy", 0), h.Subscribe("s", 0)
		defer busy.Close()
		defer s.Close()
		h.Wake("busy")
		synctest.Wait() // the loop is in busy's poll
		for range 100 {
			h.Wake("s")
		}
		close(block)
		synctest.Wait()
		if n := p.count("s"); n != 1 {
			t.Errorf("100 wake-ups while the loop was busy made %d store reads, want 1", n)
		}
		if got, _ := s.Take(); fmt.Sprint(seqsOf(got)) != "[1 2 3]" {
			t.Errorf("got %v, want [1 2 3]", seqsOf(got))
		}
	})
}

// hangingPoll never answers for keys it hangs, until its context ends; it
// records when each key was read.
type hangingPoll struct {
	mu    sync.Mutex
	hang  map[string]bool
	reads map[string][]time.Time
}

func (p *hangingPoll) poll(ctx context.Context, key string, _ int64) ([]Event, error) {
	p.mu.Lock()
	p.reads[key] = append(p.reads[key], time.Now())
	hang := p.hang[key]
	p.mu.Unlock()
	if hang {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return nil, nil
}

func (p *hangingPoll) readsOf(key string) []time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.reads[key])
}

func (p *hangingPoll) total() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, r := range p.reads {
		n += len(r)
	}
	return n
}

// TestTickServesWakesBetweenStreams: a wake-up that comes while the
// periodic poll reads slow streams is served after the stream being read,
// not after all of them.
func TestTickServesWakesBetweenStreams(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := &hangingPoll{hang: map[string]bool{"a": true, "b": true, "c": true}, reads: map[string][]time.Time{}}
		h := New(Config{Poll: p.poll, PollInterval: 10 * time.Second, PollTimeout: time.Second, Logger: slog.New(slog.DiscardHandler)})
		go h.Run(t.Context()) // until the test ends
		for _, key := range []string{"a", "b", "c"} {
			defer h.Subscribe(key, 0).Close()
		}
		time.Sleep(10*time.Second + 500*time.Millisecond) // the tick reads its first slow stream
		w := h.Subscribe("w", 0)
		defer w.Close()
		woken := time.Now()
		h.Wake("w")
		time.Sleep(5 * time.Second)
		synctest.Wait()
		reads := p.readsOf("w")
		if len(reads) != 1 {
			t.Fatalf("w was read %d times, want 1", len(reads))
		}
		if d := reads[0].Sub(woken); d > 500*time.Millisecond {
			t.Errorf("w was read %v after its wake-up; want it read when the slow stream in progress gave up, 500ms", d)
		}
	})
}

// TestTickStopsWhenCancelled: the periodic poll reads no more streams once
// the loop's context is done.
func TestTickStopsWhenCancelled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := &hangingPoll{hang: map[string]bool{"a": true, "b": true, "c": true}, reads: map[string][]time.Time{}}
		h := New(Config{Poll: p.poll, PollInterval: 10 * time.Second, PollTimeout: time.Minute, Logger: slog.New(slog.DiscardHandler)})
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() {
			h.Run(ctx)
			close(done)
		}()
		for _, key := range []string{"a", "b", "c"} {
			defer h.Subscribe(key, 0).Close()
		}
		time.Sleep(10*time.Second + 500*time.Millisecond) // the tick reads its first stream
		cancel()
		synctest.Wait()
		select {
		case <-done:
		default:
			t.Fatal("Run did not return")
		}
		if n := p.total(); n != 1 {
			t.Errorf("the tick made %d store reads, want 1: none after the cancellation", n)
		}
	})
}

// TestHeldEventsAreBoundedByBytes: events held ahead of a missing seq are
// released, for the followers to read the store, once their frames pass
// BufferBytes, however few they are.
func TestHeldEventsAreBoundedByBytes(t *testing.T) {
	t.Parallel()
	// The poll is never run: nothing fills the gap but the late publisher.
	h := New(Config{BufferEvents: 1000, BufferBytes: 100, Poll: func(context.Context, string, int64) ([]Event, error) { return nil, nil }})
	sub := h.Subscribe("s", 0)
	frame := func(seq int64) []Event { return []Event{{Seq: seq, Frame: make([]byte, 30)}} }
	h.Publish("s", frame(1))
	if got, cut := sub.Take(); cut || fmt.Sprint(seqsOf(got)) != "[1]" {
		t.Fatalf("got %v cut=%v, want [1]", seqsOf(got), cut)
	}
	for seq := int64(3); seq <= 5; seq++ { // 90 bytes held, waiting for seq 2
		h.Publish("s", frame(seq))
	}
	if got, cut := sub.Take(); cut || len(got) != 0 {
		t.Fatalf("with 90 bytes held: %v cut=%v, want them held", seqsOf(got), cut)
	}
	h.Publish("s", frame(6)) // 120 bytes: past the bound
	if got, cut := sub.Take(); !cut && len(got) == 0 {
		t.Fatal("120 bytes of events are still held in a 100-byte bound")
	}
	h.Publish("s", frame(2)) // the late publisher: released already
	h.Publish("s", frame(7))
	if got, cut := sub.Take(); cut || fmt.Sprint(seqsOf(got)) != "[7]" {
		t.Errorf("after the release: %v cut=%v, want [7]", seqsOf(got), cut)
	}
}

// WhenReady calls its function once, at the next signal, or at once when
// the subscription is signalled already; nil cancels it, and a signal
// without one still reaches Ready.
func TestWhenReady(t *testing.T) {
	t.Parallel()
	h := New(Config{})
	sub := h.Subscribe("s", 0)
	var calls atomic.Int32
	count := func() { calls.Add(1) }

	sub.WhenReady(count)
	if n := calls.Load(); n != 0 {
		t.Fatalf("called %d times before any signal", n)
	}
	h.Publish("s", events(1, 1))
	h.Publish("s", events(2, 2))
	if n := calls.Load(); n != 1 {
		t.Errorf("called %d times for two signals, want once", n)
	}
	select {
	case <-sub.Ready():
	default:
		t.Error("the signal that called the function is not in Ready")
	}

	sub.WhenReady(count) // nothing is signalled: waits
	sub.WhenReady(nil)
	h.Publish("s", events(3, 3))
	if n := calls.Load(); n != 1 {
		t.Errorf("a cancelled function was called (%d calls)", n)
	}
	sub.WhenReady(count) // signalled already: called at once
	if n := calls.Load(); n != 2 {
		t.Errorf("registered while signalled: %d calls, want 2", n)
	}
	if got, _ := sub.Take(); fmt.Sprint(seqsOf(got)) != "[1 2 3]" {
		t.Errorf("took %v", seqsOf(got))
	}

	<-sub.Ready()
	sub.WhenReady(count)
	sub.Close()
	sub.mu.Lock()
	held := sub.onReady != nil
	sub.mu.Unlock()
	if held {
		t.Error("Close kept the function (and what it holds)")
	}
	h.Publish("s", events(4, 4))
	if n := calls.Load(); n != 2 {
		t.Errorf("called after Close (%d calls)", n)
	}
}
