package live

import (
	"context"
	"fmt"
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
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go h.Run(ctx)

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
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go h.Run(ctx)
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
// in-flight events the other followers still need.
func TestLateSubscriberDoesNotStarveOthers(t *testing.T) {
	t.Parallel()
	h := New(Config{})
	early := h.Subscribe("s", 10)
	late := h.Subscribe("s", 12) // it read seqs 11 and 12 from the store
	h.Publish("s", events(11, 13))
	if got, _ := early.Take(); fmt.Sprint(seqsOf(got)) != "[11 12 13]" {
		t.Errorf("early follower got %v, want [11 12 13]", seqsOf(got))
	}
	if got, _ := late.Take(); fmt.Sprint(seqsOf(got)) != "[11 12 13]" {
		t.Errorf("late follower got %v (it drops what it has itself)", seqsOf(got))
	}
}

// TestOutOfOrderPublishesAreReordered: when a later append publishes
// before an earlier one, the hub holds it and asks the store once, rather
// than handing every follower a gap.
func TestOutOfOrderPublishesAreReordered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := &countingPoll{stored: map[string]int64{"s": 0}, queries: map[string]int{}}
		h := New(Config{Poll: p.poll, PollInterval: time.Hour})
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go h.Run(ctx)
		subs := []*Subscription{h.Subscribe("s", 0), h.Subscribe("s", 0)}
		h.Publish("s", events(1, 1))
		h.Publish("s", events(3, 3)) // seq 2's publisher is late
		synctest.Wait()
		for _, sub := range subs {
			if got, cut := sub.Take(); fmt.Sprint(seqsOf(got)) != "[1]" || cut {
				t.Fatalf("before seq 2: %v cut=%v, want [1]", seqsOf(got), cut)
			}
		}
		if n := p.count("s"); n != 1 {
			t.Errorf("the gap made %d store reads, want 1 for all followers", n)
		}
		h.Publish("s", events(2, 2)) // the late publisher
		for _, sub := range subs {
			if got, _ := sub.Take(); fmt.Sprint(seqsOf(got)) != "[2 3]" {
				t.Errorf("after seq 2: %v, want [2 3]", seqsOf(got))
			}
		}
	})
}

func TestGapFilledByThePoll(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := &countingPoll{stored: map[string]int64{"s": 3}, queries: map[string]int{}}
		h := New(Config{Poll: p.poll, PollInterval: time.Hour})
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go h.Run(ctx)
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

func TestWithoutPollGapsAreDeliveredAtOnce(t *testing.T) {
	t.Parallel()
	h := New(Config{})
	sub := h.Subscribe("s", 0)
	h.Publish("s", events(2, 2))
	if got, _ := sub.Take(); fmt.Sprint(seqsOf(got)) != "[2]" {
		t.Errorf("got %v, want [2]: without a poll nothing can fill the gap", seqsOf(got))
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
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go h.Run(ctx)
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
