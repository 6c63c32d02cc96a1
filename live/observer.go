package live

import "time"

// Observer is told what the hub does, for metrics. Its methods are called
// with the hub's lock held or from the poll loop, so they must be quick
// and must not call the hub. A nil Config.Observer observes nothing.
type Observer interface {
	// Polled is called after each store read of the poll loop: woken is
	// true for a read asked for by a wake-up (Wake, WakeSeq, held events),
	// false for the periodic one; err is the read's error.
	Polled(woken bool, elapsed time.Duration, err error)
	// Woken is called for each wake-up (Wake, WakeSeq, held events ahead
	// of a gap) with what came of it: "queued" (a read of the stream was
	// queued), "coalesced" (one was queued or in flight already),
	// "delivered" (WakeSeq of a seq the hub delivered, as for this
	// instance's own appends), "unfollowed" (no follower here) or
	// "dropped" (the wake-up queue was full; the periodic poll covers it).
	Woken(outcome string)
	// Cut is called for each subscription the hub cuts: reason is
	// "buffer_full" (its follower fell behind) or "gap" (events were
	// released past missing seqs, which the follower reads from the store).
	Cut(reason string)
}

type nopObserver struct{}

func (nopObserver) Polled(bool, time.Duration, error) {}
func (nopObserver) Woken(string)                      {}
func (nopObserver) Cut(string)                        {}

// Census counts what a hub holds of one kind of stream: the streams that
// have followers and their subscriptions.
type Census struct {
	Streams, Subscriptions int
}

// Census returns the hub's streams and subscriptions grouped by
// kind(key): kind names the kind of a stream key (see streams.KindOf) and
// must return few distinct values.
func (h *Hub) Census(kind func(key string) string) map[string]Census {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := map[string]Census{}
	for key, st := range h.streams {
		k := kind(key)
		c := out[k]
		c.Streams++
		c.Subscriptions += len(st.subs)
		out[k] = c
	}
	return out
}
