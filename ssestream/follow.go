package ssestream

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/runstream/runstream/live"
	"github.com/runstream/runstream/sse"
)

// Config bounds the streams of a Set.
type Config struct {
	// Heartbeat is the silence after which a ": heartbeat" comment is sent.
	// Defaults to 15s.
	Heartbeat time.Duration
	// WriteTimeout is the time each write to a follower is given; a
	// follower that does not take a write in time is cut (it resumes).
	// Defaults to 10s. The connection's deadline is moved only when a write
	// would have less than WriteTimeout before it, to WriteTimeout plus an
	// eighth from then: a write that stalls is cut after at least
	// WriteTimeout and at most 9/8 of it.
	WriteTimeout time.Duration
	// MaxLifetime is how long one stream may stay open before the server
	// closes it (the client resumes with Last-Event-ID). Defaults to 1h.
	MaxLifetime time.Duration
	// Retry is the reconnection delay advertised in the "retry:" field.
	// Defaults to 3s.
	Retry time.Duration
	// ReplayPage is the number of events read from the store per query when
	// replaying or catching up. Defaults to 500.
	ReplayPage int
	// MaxPerUser is the most streams one user may have open at once on
	// this instance; the next answers RATE_LIMITED (429) before any stream
	// byte. Defaults to DefaultMaxPerUser; negative: no limit.
	MaxPerUser int
	// Observer is told of streams opened and closed, writes and store
	// reads (metrics). Nil: none.
	Observer Observer
}

// DefaultMaxPerUser is the default of Config.MaxPerUser.
const DefaultMaxPerUser = 16

func (c *Config) setDefaults() {
	if c.Heartbeat <= 0 {
		c.Heartbeat = 15 * time.Second
	}
	if c.WriteTimeout <= 0 {
		c.WriteTimeout = 10 * time.Second
	}
	if c.MaxLifetime <= 0 {
		c.MaxLifetime = time.Hour
	}
	if c.Retry <= 0 {
		c.Retry = 3 * time.Second
	}
	if c.ReplayPage <= 0 {
		c.ReplayPage = 500
	}
	if c.MaxPerUser == 0 {
		c.MaxPerUser = DefaultMaxPerUser
	}
	if c.Observer == nil {
		c.Observer = nopObserver{}
	}
}

// Source is a followed stream: its live subscription and what it reads
// from the store (workflowsvc.RunStream, threadsvc.ThreadStream).
type Source interface {
	// Kind names the kind of stream for metrics (streams.KindWorkflow,
	// streams.KindThread): a constant, never an id.
	Kind() string
	// Subscribe registers the follower with the hub, before the replay
	// from cursor.
	Subscribe(cursor int64) *live.Subscription
	// Shows reports whether a live event of the subscription belongs to
	// the stream; the follower drops the others.
	Shows(ev live.Event) bool
	// Dense reports whether the stream's seqs have no gaps: then a live
	// event past the cursor's successor makes the follower read the store.
	// A stream with gaps (a filtered view) relies on the hub's
	// subscription, which hands it every event of its key in order or is
	// cut.
	Dense() bool
	// ReadAfter appends to buf the SSE frames of up to limit stored events
	// with seq > after, ascending, and reports how many it read, the seq of
	// the last, and whether that one is terminal.
	ReadAfter(ctx context.Context, buf []byte, after int64, limit int) (out []byte, n int, last int64, terminal bool, err error)
	// End is asked when the store has nothing after cursor: it returns
	// end=true when the stream is over (with an optional last frame, such as
	// a synthesised terminal frame, to send before closing), or more=true
	// when events were committed meanwhile and the store must be read again.
	End(ctx context.Context, cursor int64) (final []byte, end, more bool, err error)
}

// follower writes one SSE stream: replay from the store after the cursor,
// then live events from the hub subscription, with heartbeats, per-write
// deadlines, and a close after the terminal event.
type follower struct {
	out streamWriter
	cfg Config
	sub *live.Subscription
	src Source

	cursor int64
	dense  bool   // src.Dense()
	kind   string // src.Kind()
	buf    []byte
	// frames counts the event frames in buf, for the observer.
	frames int
	// heartbeat fires after Heartbeat of silence, or at end if that comes
	// first. One timer for both spares an idle follower a second. Writes
	// do not re-arm it (a timer update per frame): when it fires after a
	// write, it is re-armed for the rest of the silence since lastWrite.
	heartbeat *time.Timer
	// lastWrite is when the last write started.
	lastWrite time.Time
	// deadline is the write deadline last given to out (see flush).
	deadline time.Time
	// end is when the stream's MaxLifetime runs out.
	end time.Time
}

// errStreamDone ends a stream normally: the terminal event was delivered.
var errStreamDone = errors.New("stream done")

// run follows the stream until it ends, the lifetime runs out, the client
// leaves, or a write fails. Headers must be set; run sends them.
func (f *follower) run(ctx context.Context) error {
	f.lastWrite = time.Now()
	f.end = f.lastWrite.Add(f.cfg.MaxLifetime)
	f.heartbeat = time.NewTimer(f.untilHeartbeat(f.lastWrite))
	defer f.heartbeat.Stop()
	f.buf, _ = sse.AppendRetry(f.buf, f.cfg.Retry)
	if err := f.flush(); err != nil {
		return err
	}

	f.cfg.Observer.CatchUp(f.kind, "start")
	err := f.catchUp(ctx)
	for err == nil {
		select {
		case <-ctx.Done():
			return nil
		case <-f.sub.Ready():
			err = f.deliverLive(ctx)
		case <-f.heartbeat.C:
			now := time.Now()
			if !now.Before(f.end) {
				return nil // the lifetime ran out
			}
			if wait := f.untilHeartbeat(now); wait > 0 {
				f.heartbeat.Reset(wait) // written since it was armed
				continue
			}
			f.buf, _ = sse.AppendComment(f.buf, "heartbeat")
			if err = f.flush(); err == nil {
				err = f.checkEnd(ctx)
			}
			f.heartbeat.Reset(f.untilHeartbeat(time.Now()))
		}
	}
	if errors.Is(err, errStreamDone) {
		return nil
	}
	return err
}

// deliverLive writes the subscription's buffered events, all of them in
// one write. Events at or before the cursor, and those the source does not
// show, are dropped; a cut subscription, or a gap in a dense stream, means
// the store is read after the cursor instead.
func (f *follower) deliverLive(ctx context.Context) error {
	events, cut := f.sub.Take()
	if cut {
		f.cfg.Observer.CatchUp(f.kind, "cut")
		return f.catchUp(ctx)
	}
	for _, ev := range events {
		if ev.Seq <= f.cursor || !f.src.Shows(ev) {
			continue
		}
		if f.dense && ev.Seq != f.cursor+1 {
			if err := f.flush(); err != nil {
				return err
			}
			f.cfg.Observer.CatchUp(f.kind, "gap")
			if err := f.catchUp(ctx); err != nil {
				return err
			}
			continue
		}
		f.buf = append(f.buf, ev.Frame...)
		f.frames++
		f.cursor = ev.Seq
		if ev.Terminal {
			if err := f.flush(); err != nil {
				return err
			}
			return errStreamDone
		}
	}
	return f.flush()
}

// catchUp reads the store after the cursor, page by page, writing each page
// in one write, until the store has no more; then asks the source whether
// the stream is over. The next page is read while the current one is
// written, so the store's latency and the writing overlap.
func (f *follower) catchUp(ctx context.Context) error {
	pages := make(chan storePage, 1)
	// Two buffers alternate: the page just read is written from one while
	// the next page is read into the other. free is the one not in use.
	var free []byte
	f.readPage(ctx, pages, f.cursor, f.buf[:0])
	for {
		p := <-pages
		if p.err != nil {
			return fmt.Errorf("read the store after seq %d: %w", f.cursor, p.err)
		}
		full := p.n == f.cfg.ReplayPage && !p.terminal
		if full {
			f.readPage(ctx, pages, p.last, free[:0])
		}
		if p.n > 0 {
			f.cursor = p.last
		}
		f.buf, f.frames = p.buf, p.n
		err := f.flush()
		free = f.buf // written and emptied: the next page's buffer
		if full && err != nil {
			<-pages // let the read in flight finish before returning
		}
		if err != nil {
			return err
		}
		if p.terminal {
			return errStreamDone
		}
		if !full {
			break
		}
	}
	// The pages are written: the follower, which may now wait for a long
	// time, keeps no page buffer. Live delivery grows a buffer of its own.
	f.buf = nil
	return f.checkEnd(ctx)
}

// storePage is one page of frames read from the store.
type storePage struct {
	buf      []byte
	n        int
	last     int64
	terminal bool
	err      error
}

// readPage reads the page after cursor into buf on a goroutine of its own
// (see callAside) and sends it on pages.
func (f *follower) readPage(ctx context.Context, pages chan<- storePage, after int64, buf []byte) {
	go func() {
		var p storePage
		start := time.Now()
		defer func() {
			f.cfg.Observer.StoreRead(f.kind, time.Since(start), p.err)
			pages <- p
		}()
		defer recoverInto(&p.err)
		p.buf, p.n, p.last, p.terminal, p.err = f.src.ReadAfter(ctx, buf, after, f.cfg.ReplayPage)
	}()
}

// checkEnd asks the source whether the stream is over.
func (f *follower) checkEnd(ctx context.Context) error {
	var (
		final     []byte
		end, more bool
	)
	err := callAside(func() (err error) {
		final, end, more, err = f.src.End(ctx, f.cursor)
		return err
	})
	if err != nil {
		return err
	}
	if more {
		return f.catchUp(ctx)
	}
	if !end {
		return nil
	}
	f.buf = append(f.buf, final...)
	if len(final) > 0 {
		f.frames++
	}
	if err := f.flush(); err != nil {
		return err
	}
	return errStreamDone
}

// callAside runs fn on a short-lived goroutine of its own and waits for
// it. Followers make their store calls this way (or in readPage): a
// store's driver may need a deep stack, which an idle follower's goroutine
// would otherwise keep.
func callAside(fn func() error) error {
	done := make(chan error, 1)
	go func() {
		var err error
		defer func() { done <- err }()
		defer recoverInto(&err)
		err = fn()
	}()
	return <-done
}

// recoverInto, deferred, turns a panic of its goroutine into *err: neither
// net/http nor anything else recovers the panics of goroutines a handler
// starts.
func recoverInto(err *error) {
	if v := recover(); v != nil {
		*err = panicError{v}
	}
}

// panicError is a recovered panic.
type panicError struct{ value any }

func (e panicError) Error() string { return fmt.Sprintf("panic: %v", e.value) }

// flush sends the buffered bytes to the client within the write deadline.
// The deadline moves only when the write would have less than WriteTimeout
// before it; it is then set WriteTimeout plus an eighth from now (so once
// per eighth of WriteTimeout at most, not at every write: each move is a
// runtime timer update). Every write thus has between WriteTimeout and 9/8
// of it before it is cut.
func (f *follower) flush() error {
	if len(f.buf) == 0 {
		return nil
	}
	now := time.Now()
	if f.deadline.Sub(now) < f.cfg.WriteTimeout {
		f.deadline = now.Add(f.cfg.WriteTimeout + f.cfg.WriteTimeout/deadlineSlack)
	}
	if err := f.out.send(f.buf, f.deadline); err != nil {
		return err
	}
	f.cfg.Observer.Wrote(f.kind, f.frames, len(f.buf))
	f.buf, f.frames = f.buf[:0], 0
	f.lastWrite = now
	return nil
}

// deadlineSlack is the fraction of WriteTimeout (1/deadlineSlack) a write
// deadline is set beyond WriteTimeout, so that it needs moving at most
// once per that fraction of WriteTimeout.
const deadlineSlack = 8

// untilHeartbeat is the wait, from now, until the next heartbeat is due:
// Heartbeat after the last write, or sooner when the lifetime runs out.
func (f *follower) untilHeartbeat(now time.Time) time.Duration {
	return min(f.lastWrite.Add(f.cfg.Heartbeat).Sub(now), f.end.Sub(now))
}

// setStreamHeaders sets the headers of an SSE response.
func setStreamHeaders(h http.Header) {
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	h.Set("X-Content-Type-Options", "nosniff")
}
