package live

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// Defaults of Config.
const (
	DefaultBufferEvents = 256
	DefaultBufferBytes  = 1 << 20
	DefaultPollInterval = 800 * time.Millisecond
)

// Event is one committed event of a stream, ready to send.
type Event struct {
	Seq int64
	// Frame is the complete SSE frame. It is shared by every follower and
	// must not be modified.
	Frame []byte
	// Terminal marks the last event of the stream.
	Terminal bool
}

// PollFunc reads up to a page of events of stream key with seq > afterSeq,
// ascending. It is called from the hub's poll loop.
type PollFunc func(ctx context.Context, key string, afterSeq int64) ([]Event, error)

// Config configures a Hub.
type Config struct {
	// BufferEvents bounds the events buffered per subscription. Defaults to
	// DefaultBufferEvents.
	BufferEvents int
	// BufferBytes bounds the frame bytes buffered per subscription. Defaults
	// to DefaultBufferBytes.
	BufferBytes int
	// PollInterval is the period of the shared store poll. Defaults to
	// DefaultPollInterval.
	PollInterval time.Duration
	// Poll reads the store for the poll loop and Wake. Nil disables polling.
	Poll PollFunc
	// Logger receives poll errors. Defaults to slog.Default().
	Logger *slog.Logger
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
	// lastSeq is the newest seq published or polled for the stream.
	lastSeq int64
	// polling is true while a poll of the stream is in flight.
	polling bool
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
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Hub{cfg: cfg, streams: map[string]*stream{}, wake: make(chan string, 1024)}
}

// Subscribe registers a follower of stream key whose cursor is afterSeq.
// Register before replaying from the store, so that nothing committed during
// the replay is missed. Close the subscription when done.
func (h *Hub) Subscribe(key string, afterSeq int64) *Subscription {
	sub := &Subscription{hub: h, key: key, ready: make(chan struct{}, 1)}
	h.mu.Lock()
	defer h.mu.Unlock()
	st := h.streams[key]
	if st == nil {
		st = &stream{subs: map[*Subscription]struct{}{}}
		h.streams[key] = st
	}
	st.subs[sub] = struct{}{}
	st.lastSeq = max(st.lastSeq, afterSeq)
	return sub
}

// Publish hands committed events of stream key, ascending by seq, to its
// subscriptions. It never blocks on a follower.
func (h *Hub) Publish(key string, events []Event) {
	if len(events) == 0 {
		return
	}
	h.mu.Lock()
	st := h.streams[key]
	if st == nil {
		h.mu.Unlock()
		return
	}
	if events[0].Seq <= st.lastSeq {
		// Some of these were published already (a poll raced a publish, or
		// two appends published out of order); followers would drop them.
		fresh := make([]Event, 0, len(events))
		for _, e := range events {
			if e.Seq > st.lastSeq {
				fresh = append(fresh, e)
			}
		}
		events = fresh
		if len(events) == 0 {
			h.mu.Unlock()
			return
		}
	}
	st.lastSeq = events[len(events)-1].Seq
	for sub := range st.subs {
		sub.push(events, h.cfg.BufferEvents, h.cfg.BufferBytes)
	}
	h.mu.Unlock()
}

// Wake asks the poll loop to read stream key now, for example because a
// PostgreSQL notification said another instance appended to it. It never
// blocks; a wake-up lost to a full queue is covered by the periodic poll.
func (h *Hub) Wake(key string) {
	select {
	case h.wake <- key:
	default:
	}
}

// Followed reports the number of subscriptions of stream key.
func (h *Hub) Followed(key string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	if st := h.streams[key]; st != nil {
		return len(st.subs)
	}
	return 0
}

// Run polls streams with followers until ctx is done.
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
			h.poll(ctx, key)
		case <-ticker.C:
			for _, key := range h.followedKeys() {
				h.poll(ctx, key)
			}
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

// poll reads stream key after the newest seq the hub has seen and publishes
// the result. Streams without followers are skipped.
func (h *Hub) poll(ctx context.Context, key string) {
	h.mu.Lock()
	st := h.streams[key]
	if st == nil || st.polling {
		h.mu.Unlock()
		return
	}
	after := st.lastSeq
	st.polling = true
	h.mu.Unlock()

	events, err := h.cfg.Poll(ctx, key, after)

	h.mu.Lock()
	st.polling = false
	h.mu.Unlock()
	if err != nil {
		if ctx.Err() == nil {
			h.cfg.Logger.Warn("live: poll failed", "stream", key, "error", err)
		}
		return
	}
	h.Publish(key, events)
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
