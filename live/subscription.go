package live

import "sync"

// Subscription is one follower's view of a stream: a bounded buffer of
// events and a signal that it is not empty. It is safe for concurrent use.
type Subscription struct {
	hub   *Hub
	key   string
	ready chan struct{}
	// after is the subscription's frontier: the seq it started after, then
	// the newest seq handed to it (buffered, or dropped by a cut). Events at
	// or below it are not handed to it. Guarded by hub.mu.
	after int64

	mu     sync.Mutex
	buf    []Event
	bytes  int
	cut    bool
	closed bool
	// onReady is called, once, when ready is next signalled (WhenReady).
	onReady func()
}

// Ready is signalled when events are waiting or the subscription was cut.
func (s *Subscription) Ready() <-chan struct{} { return s.ready }

// WhenReady arranges for fn to be called, once, when the subscription is
// next signalled, or at once, on the caller's goroutine, when it is
// signalled already (Ready holds a signal): a follower waits this way
// without a goroutine. A later call replaces fn; nil cancels it. fn may
// run with the hub's lock held, so it must not block nor call the hub.
// The signal stays in Ready for the follower to take.
func (s *Subscription) WhenReady(fn func()) {
	s.mu.Lock()
	if fn != nil && len(s.ready) > 0 {
		s.onReady = nil
		s.mu.Unlock()
		fn()
		return
	}
	s.onReady = fn
	s.mu.Unlock()
}

// signalLocked signals Ready and returns the WhenReady function to call,
// taken off (nil: none). s.mu must be held.
func (s *Subscription) signalLocked() func() {
	select {
	case s.ready <- struct{}{}:
	default:
	}
	fn := s.onReady
	s.onReady = nil
	return fn
}

// Take returns the buffered events and empties the buffer. cut is true when
// the follower fell behind and events were dropped since the last Take: the
// follower must read the store after its cursor before using live events
// again. Take never blocks.
func (s *Subscription) Take() (events []Event, cut bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	events, cut = s.buf, s.cut
	s.buf, s.bytes, s.cut = nil, 0, false
	return events, cut
}

// Close unregisters the subscription. It is safe to call more than once.
func (s *Subscription) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	s.buf, s.onReady = nil, nil
	s.mu.Unlock()
	s.hub.unsubscribe(s)
}

// push appends the events past the subscription's frontier, or cuts the
// subscription when they do not fit, and advances the frontier past them.
// events are ascending by seq; size is frameBytes(events). It reports
// whether it cut the subscription. hub.mu must be held.
//
// Into an empty buffer (the follower took what came before) the events go
// whole, whatever their number, when their frames fit maxBytes: the
// buffer then shares the publication's slice, read-only (its capacity cut
// to its length, so an append copies), with every other subscription that
// took it, and costs no more than a slice header. maxEvents bounds what
// piles up behind a follower that has not taken its buffer. A group
// commit of more than maxEvents small events no longer sends every
// follower to the store, and a publication to a thousand followers no
// longer copies its events a thousand times.
func (s *Subscription) push(events []Event, size, maxEvents, maxBytes int) (cut bool) {
	i := 0
	for i < len(events) && events[i].Seq <= s.after {
		i++
	}
	if i > 0 {
		size -= frameBytes(events[:i])
	}
	events = events[i:]
	if len(events) == 0 {
		return false
	}
	s.after = events[len(events)-1].Seq
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return false
	}
	if !s.cut {
		switch {
		case s.bytes+size > maxBytes || len(s.buf) > 0 && len(s.buf)+len(events) > maxEvents:
			s.buf, s.bytes, s.cut = nil, 0, true
			cut = true
		case len(s.buf) == 0:
			s.buf, s.bytes = events[:len(events):len(events)], size
		default:
			s.buf = append(s.buf, events...)
			s.bytes += size
		}
	}
	wake := s.signalLocked()
	s.mu.Unlock()
	if wake != nil {
		wake()
	}
	return cut
}

// cutThrough cuts the subscription, as a push that does not fit would,
// unless its frontier is at or past seq, and advances the frontier to seq:
// the hub passed missing seqs up to seq that the follower must read from
// the store. It reports whether it cut a subscription that was not cut
// already. hub.mu must be held.
func (s *Subscription) cutThrough(seq int64) (cut bool) {
	if seq <= s.after {
		return false
	}
	s.after = seq
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return false
	}
	cut = !s.cut
	s.buf, s.bytes, s.cut = nil, 0, true
	wake := s.signalLocked()
	s.mu.Unlock()
	if wake != nil {
		wake()
	}
	return cut
}

// frameBytes is the size of the frames of events.
func frameBytes(events []Event) int {
	n := 0
	for _, e := range events {
		n += len(e.Frame)
	}
	return n
}
