package ssestream

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
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

// RangeSource is a Source that knows the last seq its follower must read
// from the store, its head (its subscription has the events after it),
// and reads the store by ranges of seqs. A catch-up from far behind the
// head reads the ranges up to it two at a time, on two of the store's
// connections, while it writes the one before (see catchUpRanges): a
// replay is not bound to one processor's worth of reading.
type RangeSource interface {
	Source
	// Head returns the seq the follower reads the store up to; a negative
	// one when the source does not know it.
	Head() int64
	// ReadRange is ReadAfter of the events with after < seq <= through;
	// limit is at least through-after, so that it reads the whole range.
	ReadRange(ctx context.Context, buf []byte, after, through int64, limit int) (out []byte, n int, last int64, terminal bool, err error)
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
	// parks tells that the follower may park while it waits (see
	// errParked): its stream took its connection over, so no handler
	// waits for it to return.
	parks bool
	// stream ends the follower's context; a parked follower learns of it
	// through stream.whenEnded.
	stream *stream
}

// errStreamDone ends a stream normally: the terminal event was delivered,
// the lifetime ran out, or the stream's context ended.
var errStreamDone = errors.New("stream done")

// errParked is returned by the follower's loop when it is to wait for its
// next wake-up without a goroutine (park) rather than on the goroutine
// that ran it. An idle stream then holds no goroutine, whose stack, once
// grown by the writes to the connection, would stay at 4 KiB or more. The
// follower parks right after its catch-up and after a heartbeat, that is
// after Heartbeat of silence; a busy stream keeps waiting on its
// goroutine, with no goroutine started per wake-up.
var errParked = errors.New("stream parked")

// Why a follower woke up (see await).
const (
	wakeDone      = iota // the stream's context ended
	wakeLive             // the subscription has events, or was cut
	wakeHeartbeat        // the heartbeat timer fired
)

// run follows the stream until it ends, the lifetime runs out, the client
// leaves (nil), or a write fails, or until it parks (errParked). Headers
// must be set; run sends them.
func (f *follower) run(ctx context.Context) error {
	f.lastWrite = time.Now()
	f.end = f.lastWrite.Add(f.cfg.MaxLifetime)
	f.heartbeat = time.NewTimer(f.untilHeartbeat(f.lastWrite))
	f.buf, _ = sse.AppendRetry(f.buf, f.cfg.Retry)
	if err := f.flush(); err != nil {
		return err
	}

	f.cfg.Observer.CatchUp(f.kind, "start")
	err := f.catchUp(ctx)
	if err == nil {
		err = f.loop(ctx, true)
	}
	if errors.Is(err, errStreamDone) {
		return nil
	}
	return err
}

// loop waits for wake-ups and handles them until the stream ends or, when
// the follower parks, until park is true before a wait: at once when
// called so, and after a heartbeat it sent (see step).
func (f *follower) loop(ctx context.Context, park bool) error {
	for {
		if park && f.parks {
			return errParked
		}
		var err error
		if park, err = f.step(ctx, f.await(ctx)); err != nil {
			return err
		}
	}
}

// step handles wake and reports whether the follower should park before
// its next wait: when wake sent a heartbeat, so the stream had been silent
// for Heartbeat. A heartbeat timer that only finds a write since it was
// armed does not count: the stream is busy.
func (f *follower) step(ctx context.Context, wake int) (park bool, err error) {
	lastWrite := f.lastWrite
	err = f.handle(ctx, wake)
	return wake == wakeHeartbeat && f.lastWrite != lastWrite, err
}

// await waits for the next wake-up.
func (f *follower) await(ctx context.Context) int {
	select {
	case <-ctx.Done():
		return wakeDone
	case <-f.sub.Ready():
		return wakeLive
	case <-f.heartbeat.C:
		return wakeHeartbeat
	}
}

// handle does what wake asks: end, deliver the live events, or send a
// heartbeat when Heartbeat has passed since the last write (and end when
// the lifetime ran out).
func (f *follower) handle(ctx context.Context, wake int) error {
	switch wake {
	case wakeDone:
		return errStreamDone
	case wakeLive:
		return f.deliverLive(ctx)
	}
	now := time.Now()
	if !now.Before(f.end) {
		return errStreamDone // the lifetime ran out
	}
	if wait := f.untilHeartbeat(now); wait > 0 {
		f.heartbeat.Reset(wait) // written since it was armed
		return nil
	}
	f.buf, _ = sse.AppendComment(f.buf, "heartbeat")
	err := f.flush()
	if err == nil {
		err = f.checkEnd(ctx)
	}
	f.heartbeat.Reset(f.untilHeartbeat(time.Now()))
	return err
}

// continueOrEnd ends the stream with err, through end, unless err is
// errParked: then it parks the follower. It is the last thing the
// goroutine that ran the follower does.
func (f *follower) continueOrEnd(ctx context.Context, err error, end func(error)) {
	if err == errParked {
		f.park(ctx, end)
		return
	}
	end(err)
}

// parking is a parked follower's wake-ups: the first of its context's
// end, its subscription's signal and its heartbeat starts a goroutine
// that resumes the follower (see resume); the others then do nothing.
type parking struct {
	woken atomic.Bool
	// mu is held while park registers the wake-ups, so that cancel, which
	// unregisters them, waits for it.
	mu        sync.Mutex
	stopEnd   func() bool
	heartbeat *time.Timer
}

// park makes the follower wait for its next wake-up with no goroutine of
// its own: callbacks on its stream's end (stream.whenEnded), its
// subscription (live.Subscription.WhenReady) and a heartbeat timer
// (time.AfterFunc).
func (f *follower) park(ctx context.Context, end func(error)) {
	p := &parking{}
	wake := func(why int) {
		if p.woken.CompareAndSwap(false, true) {
			go f.resume(ctx, p, why, end)
		}
	}
	f.heartbeat.Stop()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stopEnd = f.stream.whenEnded(func() { wake(wakeDone) })
	p.heartbeat = time.AfterFunc(max(f.untilHeartbeat(time.Now()), 0), func() { wake(wakeHeartbeat) })
	f.sub.WhenReady(func() { wake(wakeLive) })
}

// cancel unregisters the wake-ups that did not fire.
func (p *parking) cancel(sub *live.Subscription) {
	p.mu.Lock()
	defer p.mu.Unlock()
	sub.WhenReady(nil)
	p.stopEnd()
	p.heartbeat.Stop()
}

// resume runs a parked follower, woken by why, on the goroutine its
// wake-up started: it handles the wake-up, then loops until the stream
// ends or the follower parks again.
func (f *follower) resume(ctx context.Context, p *parking, why int, end func(error)) {
	p.cancel(f.sub)
	if why == wakeLive {
		// The signal that woke it is still in Ready (WhenReady leaves it);
		// deliverLive takes every event it stands for.
		select {
		case <-f.sub.Ready():
		default:
		}
	}
	if why != wakeHeartbeat {
		f.heartbeat.Reset(max(f.untilHeartbeat(time.Now()), 0))
	}
	err := protect(func() error {
		park, err := f.step(ctx, why)
		if err != nil {
			return err
		}
		return f.loop(ctx, park)
	})
	f.continueOrEnd(ctx, err, end)
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
	if rs, ok := f.src.(RangeSource); ok {
		if err := f.catchUpRanges(ctx, rs); err != nil {
			return err
		}
	}
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

// catchUpRanges writes the events after the cursor up to the source's
// head, when that is more than two pages: it reads them by ranges of seqs,
// two ranges in flight while it writes the range before them, and moves
// the cursor to the head. A range starts ReplayPage seqs wide, widens (up
// to 8 pages) while ranges come back less than a quarter full, as those
// of a filtered view do, and narrows again when they come back more than
// half full: a range holds at most 8 pages of events. The catch-up then
// goes on after the head as it would without ranges.
func (f *follower) catchUpRanges(ctx context.Context, rs RangeSource) error {
	page := int64(f.cfg.ReplayPage)
	head := rs.Head()
	if head-f.cursor <= 2*page {
		return nil
	}
	type rangeRead struct {
		through int64
		width   int64 // the range's, to tell how full it came back
		pages   chan storePage
	}
	var (
		inFlight []rangeRead
		free     [][]byte // written buffers, for the next ranges
		next     = f.cursor
		width    = page
	)
	issue := func() {
		through := min(next+width, head)
		r := rangeRead{through: through, width: width, pages: make(chan storePage, 1)}
		var buf []byte
		if n := len(free); n > 0 {
			buf, free = free[n-1][:0], free[:n-1]
		}
		after, limit := next, int(width)
		f.read(r.pages, func() ([]byte, int, int64, bool, error) {
			return rs.ReadRange(ctx, buf, after, through, limit)
		})
		inFlight, next = append(inFlight, r), through
	}
	for len(inFlight) < 2 && next < head {
		issue()
	}
	for len(inFlight) > 0 {
		r := inFlight[0]
		inFlight = inFlight[1:]
		p := <-r.pages
		switch {
		case p.err != nil:
		case p.n < int(r.width)/4 && width < 8*page:
			width = min(2*r.width, 8*page)
		case p.n > int(r.width)/2 && width > page:
			width = max(r.width/2, page)
		}
		if p.err == nil && !p.terminal && next < head {
			issue()
		}
		var err error
		if p.err != nil {
			err = fmt.Errorf("read the store after seq %d: %w", f.cursor, p.err)
		} else {
			f.buf, f.frames = p.buf, p.n
			err = f.flush()
			free = append(free, f.buf)
		}
		if err == nil && p.terminal {
			err = errStreamDone
		}
		if err != nil {
			for _, r := range inFlight {
				<-r.pages // let the reads in flight finish before returning
			}
			return err
		}
		f.cursor = r.through
	}
	f.buf = nil
	return nil
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
	f.read(pages, func() ([]byte, int, int64, bool, error) {
		return f.src.ReadAfter(ctx, buf, after, f.cfg.ReplayPage)
	})
}

// read runs the store read of one page on a goroutine of its own (see
// callAside) and sends the page on pages.
func (f *follower) read(pages chan<- storePage, read func() ([]byte, int, int64, bool, error)) {
	go func() {
		var p storePage
		start := time.Now()
		defer func() {
			f.cfg.Observer.StoreRead(f.kind, time.Since(start), p.err)
			pages <- p
		}()
		defer recoverInto(&p.err)
		p.buf, p.n, p.last, p.terminal, p.err = read()
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

// protect runs fn and returns its error, or its panic as a panicError.
func protect(fn func() error) (err error) {
	defer recoverInto(&err)
	return fn()
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
