package live_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/runstream/runstream/live"
)

// recorder is a live.Observer that records what it is told.
type recorder struct {
	mu    sync.Mutex
	calls []string
}

func (r *recorder) add(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, s)
}

func (r *recorder) Polled(woken bool, _ time.Duration, err error) {
	r.add(map[bool]string{true: "poll wake", false: "poll interval"}[woken])
}
func (r *recorder) Woken(outcome string) { r.add("wake " + outcome) }
func (r *recorder) Cut(reason string)    { r.add("cut " + reason) }

func (r *recorder) has(s string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Contains(r.calls, s)
}

// TestObserver: the hub reports a follower cut for its full buffer, the
// outcomes of wake-ups, its polls, and its census by kind.
func TestObserver(t *testing.T) {
	rec := &recorder{}
	polled := make(chan struct{}, 16)
	h := live.New(live.Config{BufferEvents: 2, PollInterval: time.Hour, Observer: rec,
		Poll: func(context.Context, string, int64) ([]live.Event, error) {
			polled <- struct{}{}
			return nil, nil
		}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go h.Run(ctx)

	h.WakeSeq("k:none", 1)
	sub := h.Subscribe("k:a", 0)
	defer sub.Close()
	other := h.Subscribe("j:b", 0)
	defer other.Close()
	// Three events not taken, in a buffer of two: the third cuts.
	h.Publish("k:a", []live.Event{{Seq: 1, Frame: []byte("1")}, {Seq: 2, Frame: []byte("2")}})
	h.Publish("k:a", []live.Event{{Seq: 3, Frame: []byte("3")}})
	h.WakeSeq("k:a", 3)
	h.Wake("k:a")
	<-polled
	for _, want := range []string{"wake unfollowed", "cut buffer_full", "wake delivered", "wake queued", "poll wake"} {
		deadline := time.Now().Add(10 * time.Second)
		for !rec.has(want) {
			if time.Now().After(deadline) {
				t.Fatalf("the observer was not told %q: %v", want, rec.calls)
			}
			time.Sleep(time.Millisecond)
		}
	}
	census := h.Census(func(key string) string { return key[:1] })
	if census["k"] != (live.Census{Streams: 1, Subscriptions: 1}) || census["j"] != (live.Census{Streams: 1, Subscriptions: 1}) {
		t.Errorf("census = %v", census)
	}
}
