package live

import (
	"cmp"
	"context"
	"log/slog"
	"math"
	"slices"
	"sync"
	"time"
)

// Defaults of Config.
const (
	DefaultBufferEvents = 256
	DefaultBufferBytes  = 1 << 20
	DefaultPollInterval = 800 * time.Millisecond
	DefaultPollTimeout  = 5 * time.Second
)

// Event is one committed event of a stream, ready to send.
type Event struct {
	Seq int64
	// Frame is the complete SSE frame. It is shared by every follower and
	// must not be modified.
	Frame []byte
	// Terminal marks the last event of the stream.
	Terminal bool
	// Attrs is what the stream's followers filter on (a thread row's
	// owner, run and category, say). The hub never reads it; like Frame it
	// is shared and must not be modified.
	Attrs any
}

// PollFunc reads up to a page of events of stream key with seq > afterSeq,
// ascending. It is called from the hub's poll loop.
type PollFunc func(ctx context.Context, key string, afterSeq int64) ([]Event, error)

// Config configures a Hub.
type Config struct {
	// BufferEvents bounds the events buffered per subscription. Defaults to
	// DefaultBufferEvents.
	BufferEvents int
	// BufferBytes bounds the frame bytes buffered per subscription, and the
	// frame bytes a dense stream holds ahead of a missing seq (see Publish).
	// Defaults to DefaultBufferBytes.
	BufferBytes int
	// PollInterval is the period of the shared store poll. Defaults to
	// DefaultPollInterval.
	PollInterval time.Duration
	// Poll reads the store for the poll loop and Wake. Nil disables polling.
	Poll PollFunc
	// PollTimeout bounds one poll. Defaults to DefaultPollTimeout.
	PollTimeout time.Duration
	// Logger receives poll errors. Defaults to slog.Default().
	Logger *slog.Logger
	// Observer is told of polls, wake-ups and cuts (metrics). Nil: none.
	Observer Observer
}

// Hub fans events out to subscriptions, per stream key. It is safe for
// concurrent use. Start the poll loop with Run.
type Hub struct {
	cfg Config

	mu      sync.Mutex
	streams map[string]*stream
	wake    chan string
}

type stream struct {
	subs map[*Subscription]struct{}
	// lastSeq is the stream's frontier: polls read after it and Publish
	// drops what is at or below it. It is the newest seq delivered to the
	// subscriptions or a seq a subscription started after (see subscribe
	// and raiseToFrontiers). For a dense stream every seq up to it was
	// delivered or is in the store from before the subscriptions.
	lastSeq int64
	// seen is the newest seq of an event delivered to the stream's
	// subscriptions (0: none yet). It is committed, so never past the
	// stored end: lastSeq is never lowered below it (see subscribe).
	seen int64
	// view marks a filtered view, whose seqs have gaps (SubscribeView).
	view bool
	// pending holds events of a dense stream that arrived ahead of a
	// missing seq, until the missing ones arrive or a poll brings them;
	// pendingBytes is the size of their frames.
	pending      map[int64]Event
	pendingBytes int
	// queued is true while the stream waits in the wake-up queue, so that
	// it waits there at most once.
	queued bool
	// polling is true while a poll of the stream is in flight; again asks
	// for one more poll after it.
	polling, again bool
	// gapWokeAt is when held events last woke the poll loop: they wake
	// it at most once per PollInterval (see wakeForGapLocked).
	gapWokeAt time.Time
}

// New returns a hub.
func New(cfg Config) *Hub {
	if cfg.BufferEvents <= 0 {
		cfg.BufferEvents = DefaultBufferEvents
	}
	if cfg.BufferBytes <= 0 {
		cfg.BufferBytes = DefaultBufferBytes
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = DefaultPollInterval
	}
	if cfg.PollTimeout <= 0 {
		cfg.PollTimeout = DefaultPollTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Observer == nil {
		cfg.Observer = nopObserver{}
	}
	return &Hub{cfg: cfg, streams: map[string]*stream{}, wake: make(chan string, 1024)}
}

// Subscribe registers a follower of stream key, a dense stream (seqs 1, 2,
// 3, … without gaps, as a workflow run's or a thread's), whose cursor is
// afterSeq. Register before replaying from the store, so that nothing
// committed during the replay is missed. Close the subscription when done.
//
// The subscription's frontier starts at afterSeq and follows the events
// handed to it: it never receives, nor is cut by, an event at or below its
// frontier. It receives every event committed after it was registered
// (the follower reads the earlier ones from the store, after its cursor),
// and possibly some committed before; the follower drops what it has.
//
// Its events follow each other without a gap: after the first one handed
// to it, every seq of the stream that exists is handed to it, in order,
// unless it is cut (see Take). The seqs it misses before its first event
// were committed before it was registered.
//
// afterSeq should be the stream's newest seq read before subscribing (or
// the follower's cursor when it is not past that): a lower seq only costs
// the follower events it drops. A seq past the stored end makes the
// subscription miss, as already delivered, the events up to it; it does
// not make the hub drop them for the other followers.
func (h *Hub) Subscribe(key string, afterSeq int64) *Subscription {
	return h.subscribe(key, afterSeq, false)
}

// SubscribeView registers a follower of a filtered view of a stream, whose
// seqs have gaps: its events are delivered in the order they come, without
// waiting for missing seqs. afterSeq is the follower's cursor, which may
// be old: the follower replays the view from the store after it, and the
// subscription, as Subscribe's, receives what commits after it was
// registered.
func (h *Hub) SubscribeView(key string, afterSeq int64) *Subscription {
	return h.subscribe(key, afterSeq, true)
}

func (h *Hub) subscribe(key string, afterSeq int64, view bool) *Subscription {
	sub := &Subscription{hub: h, key: key, after: afterSeq, ready: make(chan struct{}, 1)}
	h.mu.Lock()
	defer h.mu.Unlock()
	st := h.streams[key]
	if st == nil {
		st = &stream{subs: map[*Subscription]struct{}{}, view: view, lastSeq: afterSeq}
		h.streams[key] = st
	}
	// The new subscription needs only what commits from now on, whose seqs
	// are past the stored end: the frontier can stay, unless it may itself
	// be past the stored end, being a seq a subscription started after that
	// no delivered event confirms (seen). Then it is lowered, so that such a
	// seq cannot starve the new follower, but never below seen: an old
	// cursor does not make the hub read the stream's history again. It is
	// never raised here: the hub would drop, as already delivered, events
	// the other followers need.
	if afterSeq < st.lastSeq {
		st.lastSeq = max(st.seen, afterSeq)
	}
	st.subs[sub] = struct{}{}
	return sub
}

// raiseToFrontiers raises lastSeq to the lowest frontier of the stream's
// subscriptions, when it is below it (the follower that lowered it has
// left, or events were handed out since): no subscription needs an event at
// or below that. Held events it passes are dropped. h.mu must be held.
func (st *stream) raiseToFrontiers() {
	low := int64(math.MaxInt64)
	for sub := range st.subs {
		low = min(low, sub.after)
	}
	if len(st.subs) == 0 || low <= st.lastSeq {
		return
	}
	st.lastSeq = low
	for seq, e := range st.pending {
		if seq <= low {
			delete(st.pending, seq)
			st.pendingBytes -= len(e.Frame)
		}
	}
}

// Publish hands committed events of stream key, ascending by seq, to its
// subscriptions. It never blocks on a follower.
//
// Commit order is seq order, but two appends may publish in the other
// order. For a dense stream the hub therefore holds events that arrive
// ahead of a missing seq and asks the poll loop to read the store once,
// instead of letting every follower see the gap and read the store
// itself; the missing events, from their publisher or from that poll,
// release the held ones in order. Without a poll function, or when more
// than BufferEvents events or BufferBytes bytes of frames are held, they
// are released at once and the subscriptions cut: their followers read the
// store, which has the missing events.
func (h *Hub) Publish(key string, events []Event) {
	if len(events) == 0 {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	st := h.streams[key]
	if st == nil {
		return
	}
	var out []Event
	if st.view {
		for _, e := range events {
			if e.Seq > st.lastSeq {
				out = append(out, e)
				st.lastSeq = e.Seq
			}
		}
	} else {
		var gap bool
		out, gap = st.release(events, h.cfg.Poll != nil, h.cfg.BufferEvents, h.cfg.BufferBytes)
		if len(st.pending) > 0 {
			h.wakeForGapLocked(key, st)
		}
		if gap {
			h.cutLocked(st, out)
			return
		}
	}
	h.deliverLocked(st, out)
}

// deliverLocked hands out, ascending by seq, to the stream's
// subscriptions. h.mu must be held.
func (h *Hub) deliverLocked(st *stream, out []Event) {
	if len(out) == 0 {
		return
	}
	st.seen = out[len(out)-1].Seq
	size := frameBytes(out)
	for sub := range st.subs {
		if sub.push(out, size, h.cfg.BufferEvents, h.cfg.BufferBytes) {
			h.cfg.Observer.Cut("buffer_full")
		}
	}
}

// cutLocked is deliverLocked for events released past missing seqs that
// the store may hold: the subscriptions that would receive them are cut
// instead, so that their followers read the store, which has the missing
// events, rather than see a gap. h.mu must be held.
func (h *Hub) cutLocked(st *stream, out []Event) {
	if len(out) == 0 {
		return
	}
	st.seen = out[len(out)-1].Seq
	for sub := range st.subs {
		if sub.cutThrough(out[len(out)-1].Seq) {
			h.cfg.Observer.Cut("gap")
		}
	}
}

// release adds events to the held ones and returns, in order, those that
// follow lastSeq without a gap. When it may not wait (no poll to fill the
// gap), or more than maxEvents events or maxBytes bytes of frames are held,
// it returns all of them and gap=true: they skip missing seqs.
func (st *stream) release(events []Event, mayWait bool, maxEvents, maxBytes int) (out []Event, gap bool) {
	for _, e := range events {
		if e.Seq > st.lastSeq {
			st.hold(e)
		}
	}
	out = st.releaseNext(nil)
	if len(st.pending) > 0 && (!mayWait || len(st.pending) > maxEvents || st.pendingBytes > maxBytes) {
		out = st.releaseHeld(out, math.MaxInt64)
		gap = true
	}
	return out, gap
}

// hold adds e to the held events, replacing one of the same seq.
func (st *stream) hold(e Event) {
	if st.pending == nil {
		st.pending = map[int64]Event{}
	}
	if old, ok := st.pending[e.Seq]; ok {
		st.pendingBytes -= len(old.Frame)
	}
	st.pending[e.Seq] = e
	st.pendingBytes += len(e.Frame)
}

// releaseNext appends to out the held events that follow lastSeq without a
// gap, in order, and advances lastSeq past them.
func (st *stream) releaseNext(out []Event) []Event {
	for {
		e, ok := st.pending[st.lastSeq+1]
		if !ok {
			return out
		}
		out = append(out, e)
		delete(st.pending, e.Seq)
		st.pendingBytes -= len(e.Frame)
		st.lastSeq = e.Seq
	}
}

// releaseHeld appends to out, ascending, the held events with seq <=
// through, passing missing seqs, and advances lastSeq past them.
func (st *stream) releaseHeld(out []Event, through int64) []Event {
	start := len(out)
	for seq, e := range st.pending {
		if seq > through {
			continue
		}
		if seq > st.lastSeq {
			out = append(out, e)
		}
		delete(st.pending, seq)
		st.pendingBytes -= len(e.Frame)
	}
	if len(out) > start {
		slices.SortFunc(out[start:], func(a, b Event) int { return cmp.Compare(a.Seq, b.Seq) })
		st.lastSeq = max(st.lastSeq, out[len(out)-1].Seq)
	}
	return out
}

// maxHeld returns the highest seq held (0: none).
func (st *stream) maxHeld() int64 {
	var m int64
	for seq := range st.pending {
		m = max(m, seq)
	}
	return m
}

// publishPolled hands out what a poll of key read after seq after, while
// heldBefore was the highest seq held when the poll started.
//
// The store is the record, and commit order is seq order: a seq up to the
// last one the poll returned that it did not return does not exist, and
// when the poll returned nothing, neither does any seq below heldBefore
// (the held events were committed before the poll started). The hub
// passes those missing seqs instead of waiting for them, so that a
// permanent gap (events deleted, a record that could not be framed) costs
// one poll, not a poll after every publish.
func (h *Hub) publishPolled(key string, after, heldBefore int64, events []Event) {
	h.mu.Lock()
	st := h.streams[key]
	if st == nil || st.view {
		h.mu.Unlock()
		if st != nil {
			h.Publish(key, events)
		}
		return
	}
	defer h.mu.Unlock()
	var out []Event
	if st.lastSeq >= after { // else a subscription lowered the frontier meanwhile: release as usual
		certified := heldBefore
		if len(events) > 0 {
			certified = events[len(events)-1].Seq
		}
		for _, e := range events {
			if e.Seq > st.lastSeq {
				st.hold(e)
			}
		}
		out = st.releaseHeld(nil, certified)
		events = nil
	}
	more, gap := st.release(events, true, h.cfg.BufferEvents, h.cfg.BufferBytes)
	out = append(out, more...)
	if len(st.pending) > 0 {
		h.wakeForGapLocked(key, st)
	}
	if gap {
		h.cutLocked(st, out)
		return
	}
	h.deliverLocked(st, out)
}

// Wake asks the poll loop to read stream key now, for example because a
// PostgreSQL notification said another instance appended to it. It never
// blocks; a wake-up lost to a full queue is covered by the periodic poll.
// A stream waits in the queue at most once: wake-ups while it waits, or
// while it is being read, make at most one more read. Use WakeSeq when the
// seq appended is known.
func (h *Hub) Wake(key string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.wakeLocked(key)
}

// WakeSeq is Wake for an append whose newest seq is seq: it does nothing
// when the hub already delivered seq to the stream's followers, as for
// this instance's own appends, which it published itself.
func (h *Hub) WakeSeq(key string, seq int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if st := h.streams[key]; st != nil && seq <= st.lastSeq {
		h.cfg.Observer.Woken("delivered")
		return
	}
	h.wakeLocked(key)
}

// wakeForGapLocked queues a poll of key for the events it holds ahead of
// a missing seq, unless held events of the stream did so less than
// PollInterval ago: then the missing events come from their publisher (as
// they almost always do: two appends published in the other order) or
// from the next periodic poll. A stream whose store lacks seqs for good
// therefore costs at most one read per PollInterval beyond the periodic
// one, however often it is published to, and cannot keep the poll loop
// from the other streams. h.mu must be held.
func (h *Hub) wakeForGapLocked(key string, st *stream) {
	now := time.Now()
	if !st.gapWokeAt.IsZero() && now.Sub(st.gapWokeAt) < h.cfg.PollInterval {
		return
	}
	st.gapWokeAt = now
	h.wakeLocked(key)
}

// wakeLocked queues a poll of key, unless it is queued already, or, when
// one is in flight, asks for another after it. h.mu must be held.
func (h *Hub) wakeLocked(key string) {
	st := h.streams[key]
	switch {
	case st == nil:
		h.cfg.Observer.Woken("unfollowed")
		return // nobody follows it (PostgreSQL wakes every instance)
	case st.polling:
		st.again = true
		h.cfg.Observer.Woken("coalesced")
		return
	case st.queued:
		h.cfg.Observer.Woken("coalesced")
		return
	}
	select {
	case h.wake <- key:
		st.queued = true
		h.cfg.Observer.Woken("queued")
	default:
		h.cfg.Observer.Woken("dropped")
	}
}

// Logger returns the hub's logger (Config.Logger), for its publishers to
// report what they could not publish.
func (h *Hub) Logger() *slog.Logger { return h.cfg.Logger }

// Followed reports the number of subscriptions of stream key.
func (h *Hub) Followed(key string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	if st := h.streams[key]; st != nil {
		return len(st.subs)
	}
	return 0
}

// Run polls streams with followers until ctx is done: the streams woken
// (Wake), and every PollInterval each followed stream, one after another,
// serving the wake-ups that came meanwhile between two streams.
func (h *Hub) Run(ctx context.Context) {
	if h.cfg.Poll == nil {
		<-ctx.Done()
		return
	}
	ticker := time.NewTicker(h.cfg.PollInterval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case key := <-h.wake:
			h.poll(ctx, key, true)
		case <-ticker.C:
			for _, key := range h.followedKeys() {
				h.serveWakes(ctx)
				if ctx.Err() != nil {
					return
				}
				h.poll(ctx, key, false)
			}
		}
	}
}

// serveWakes polls the streams waiting in the wake-up queue, as many as
// wait when it starts, so that a stream woken without pause cannot hold
// up the caller.
func (h *Hub) serveWakes(ctx context.Context) {
	for range len(h.wake) {
		if ctx.Err() != nil {
			return
		}
		select {
		case key := <-h.wake:
			h.poll(ctx, key, true)
		default:
			return
		}
	}
}

func (h *Hub) followedKeys() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	keys := make([]string, 0, len(h.streams))
	for key := range h.streams {
		keys = append(keys, key)
	}
	return keys
}

// poll reads stream key after its frontier and publishes the result.
// Streams without followers are skipped. woken is true when key was taken
// from the wake-up queue: a stream read since it was queued (by the
// periodic poll) is not read again.
func (h *Hub) poll(ctx context.Context, key string, woken bool) {
	for {
		h.mu.Lock()
		st := h.streams[key]
		if st == nil || st.polling || (woken && !st.queued) {
			h.mu.Unlock()
			return
		}
		st.queued = false
		st.raiseToFrontiers()
		after, heldBefore := st.lastSeq, st.maxHeld()
		st.polling = true
		h.mu.Unlock()

		// One slow query must not stall the polls and wake-ups of every
		// other stream: the loop runs them one after another.
		pollCtx, cancel := context.WithTimeout(ctx, h.cfg.PollTimeout)
		start := time.Now()
		events, err := h.cfg.Poll(pollCtx, key, after)
		cancel()
		h.cfg.Observer.Polled(woken, time.Since(start), err)
		woken = false // a read asked for by again is not queued
		if err != nil && ctx.Err() == nil {
			h.cfg.Logger.Warn("live: poll failed", "stream", key, "error", err)
		}
		if err == nil {
			h.publishPolled(key, after, heldBefore, events)
		}
		h.mu.Lock()
		st.polling = false
		again := st.again
		st.again = false
		h.mu.Unlock()
		if !again || ctx.Err() != nil {
			return
		}
	}
}

func (h *Hub) unsubscribe(sub *Subscription) {
	h.mu.Lock()
	defer h.mu.Unlock()
	st := h.streams[sub.key]
	if st == nil {
		return
	}
	delete(st.subs, sub)
	if len(st.subs) == 0 {
		delete(h.streams, sub.key)
	}
}
