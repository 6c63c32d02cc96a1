package ssestream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"runtime/debug"
	"strconv"
	"sync"
	"time"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/tracing"
)

// Options are what Serve needs of the request beyond the stream itself:
// whose it is, until when, and the caller's accounting and logging.
type Options struct {
	// User is the caller, whose open streams count against
	// Config.MaxPerUser.
	User string
	// Expires, when set, cuts the stream's lifetime so that it ends when
	// the caller's credential or session expires (the client
	// re-authenticates and resumes with Last-Event-ID).
	Expires time.Time
	// AfterRevoke, when set, is called as the stream starts with end, the
	// function that ends the stream, for it to call once the caller's
	// credential is revoked (httpapi.Server.AfterRevoke: an API key
	// removed from the keys file); it returns the stop that Serve calls
	// when the stream has ended. A revoked stream ends as when Expires
	// passes: cleanly, so that the client reconnects, re-authenticates
	// and resumes with Last-Event-ID. end may be called at any time, from
	// any goroutine, and more than once.
	AfterRevoke func(end func()) (stop func())
	// Limited, when set, is called with the outcome of the per-user limit
	// check: nil when the stream may open, else the RATE_LIMITED error.
	Limited func(err error)
	// Detach, when set, is called once the stream took its connection
	// over, so outlives its handler; the finish it returns (nil: none) is
	// called when the stream ends, with the status and the body bytes
	// (httpapi's: the access log line, the metrics and the server span).
	Detach func(r *http.Request) (finish func(status int, bytes int64))
	// Logger logs the streams cut by an error (nil: not logged), with
	// LogAttrs, which name the stream, before the cursor and the error.
	Logger   *slog.Logger
	LogAttrs []slog.Attr
}

// Serve answers a stream request: it subscribes to the hub, then its
// follower replays src from the store after cursor and goes on live
// (registered first, so an event committed during the replay is either
// read by it or delivered live), until the stream ends. It returns an
// error, with nothing written but a Retry-After header and nothing
// subscribed, when opts.User has too many streams open (RATE_LIMITED) or
// the Set is shut down (UNAVAILABLE); a HEAD request gets the headers
// only. On an HTTP/1.x connection Serve returns once the stream took the
// connection over; otherwise when the stream ends. The request's trace
// span records a resume (cursor > 0); it lasts until the stream ends when
// opts.Detach ends it.
func (set *Set) Serve(w http.ResponseWriter, r *http.Request, src Source, cursor int64, opts Options) error {
	release, err := set.perUser.acquire(opts.User)
	if opts.Limited != nil {
		opts.Limited(err)
	}
	if err != nil {
		set.setRetryAfter(w)
		return err
	}
	setStreamHeaders(w.Header())
	if r.Method == http.MethodHead {
		release()
		w.WriteHeader(http.StatusOK)
		return nil
	}
	// A stream taken over outlives its request: its context keeps the
	// request's span, not its cancellation or its other values, which
	// would keep the request's and its connection's contexts for as long.
	ctx, st, ok := set.add(tracing.Detached(r.Context()))
	if !ok {
		release()
		set.setRetryAfter(w)
		return runstream.Errorf(runstream.CodeUnavailable, "the server is shutting down")
	}
	done := func() { set.remove(st) }
	if opts.AfterRevoke != nil {
		// end ends the stream's context: the follower then ends as when
		// its lifetime runs out (errStreamDone).
		stopRevoke := opts.AfterRevoke(st.end)
		done = func() {
			stopRevoke()
			set.remove(st)
		}
	}
	cfg := set.cfg
	if !opts.Expires.IsZero() {
		cfg.MaxLifetime = max(min(cfg.MaxLifetime, time.Until(opts.Expires)), time.Millisecond)
	}
	if cursor > 0 {
		tracing.StreamResumed(ctx, cursor)
	}
	f := &follower{cfg: cfg, sub: src.Subscribe(cursor), src: src, cursor: cursor, dense: src.Dense(), kind: src.Kind(), stream: st}
	if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
		out := newConnStream(conn, r, w.Header())
		f.out = out
		var finish func(status int, bytes int64)
		if opts.Detach != nil {
			finish = opts.Detach(r)
		}
		go func() {
			unwatch := set.watch(conn, st)
			end := func(err error) {
				defer done()
				clean := f.finish(ctx, &opts, release, err)
				unwatch()
				out.close(clean, time.Now().Add(f.cfg.WriteTimeout))
				if finish != nil {
					finish(http.StatusOK, out.written)
				}
			}
			f.parks = true
			f.continueOrEnd(ctx, f.start(ctx), end)
		}()
		return nil
	}
	// Not an HTTP/1.x connection: stay with net/http, and end with the
	// request too.
	defer done()
	stop := context.AfterFunc(r.Context(), st.end)
	defer stop()
	w.WriteHeader(http.StatusOK)
	f.out = &responseStream{w: w, rc: http.NewResponseController(w)}
	follow(ctx, f, &opts, release)
	return nil
}

// Acquire counts one more stream of user against the Set's per-user
// limit (Config.MaxPerUser), for a stream served elsewhere (a LangGraph
// join), so that a user's streams of every kind share one limit: it
// answers RATE_LIMITED when user has the most open, else a release to
// call once the stream ended.
func (set *Set) Acquire(user string) (release func(), err error) { return set.perUser.acquire(user) }

// Shutdown ends the streams, those that took their connection over from
// net/http included (http.Server.Shutdown neither closes nor waits for
// them), and refuses later ones UNAVAILABLE. It returns when the streams
// have ended, or with ctx's error.
func (set *Set) Shutdown(ctx context.Context) error { return set.shutdown(ctx) }

// setRetryAfter tells a refused stream request to come back after the
// streams' retry delay, in whole seconds.
func (set *Set) setRetryAfter(w http.ResponseWriter) {
	w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(set.cfg.Retry.Seconds()))))
}

// follow runs f until its stream ends, then closes its subscription and
// calls release. It reports whether the stream ended cleanly (terminal
// event, lifetime, cancelled by shutdown or by a client that left) rather
// than by an error; an error of a stream whose context is still live is
// logged, a panic too.
func follow(ctx context.Context, f *follower, opts *Options, release func()) (clean bool) {
	return f.finish(ctx, opts, release, f.start(ctx))
}

// start tells the observer of the stream and runs f (see follower.run),
// a panic turned into the error.
func (f *follower) start(ctx context.Context) error {
	f.cfg.Observer.Opened(f.kind)
	return protect(func() error { return f.run(ctx) })
}

// finish ends f's stream with the outcome err of its follower: it stops
// the heartbeat, tells the observer, logs an error, closes the
// subscription and calls release. It reports whether the stream ended
// cleanly (see follow).
func (f *follower) finish(ctx context.Context, opts *Options, release func(), err error) (clean bool) {
	defer release()
	defer f.sub.Close()
	if f.heartbeat != nil {
		f.heartbeat.Stop()
	}
	if errors.Is(err, errStreamDone) {
		err = nil
	}
	f.cfg.Observer.Closed(f.kind, closeReason(ctx, err))
	if err != nil && ctx.Err() == nil && opts.Logger != nil {
		level := slog.LevelInfo // a client that left or fell behind: it resumes
		if errors.As(err, new(panicError)) {
			level = slog.LevelError
		}
		attrs := append(opts.LogAttrs[:len(opts.LogAttrs):len(opts.LogAttrs)], slog.Int64("cursor", f.cursor), slog.Any("error", err))
		opts.Logger.LogAttrs(ctx, level, "stream cut", attrs...)
	}
	return err == nil || ctx.Err() != nil
}

// closeReason names why a stream ended, as Observer.Closed does.
func closeReason(ctx context.Context, err error) string {
	switch {
	case err == nil || ctx.Err() != nil:
		return "done"
	case errors.Is(err, os.ErrDeadlineExceeded):
		return "write_timeout"
	}
	return "error"
}

// Set serves streams and tracks the open ones, so that Shutdown can end
// them and wait for them; it watches the connections taken over, so that a
// stream whose client left ends within peerCheckInterval, and counts each
// user's open streams (Config.MaxPerUser). Create it with NewSet; it is
// safe for concurrent use.
type Set struct {
	cfg     Config
	perUser *userStreams

	mu     sync.Mutex
	closed bool
	// streams are the open streams, which shutdown ends.
	streams map[*stream]struct{}
	// stop is cancelled by shutdown, which stops the sweeper.
	stop   context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	// watched are the taken-over connections and their streams; a
	// sweeper runs while there are any.
	watched  map[net.Conn]*stream
	sweeping bool
	// storm counts the take-overs; returnMemory runs when a storm of them
	// is over (debug.FreeOSMemory; tests count the calls instead).
	storm        stormWatch
	returnMemory func()
}

// stormSize is how many take-overs make a connection storm (see
// stormWatch): each leaves about 12 KiB of garbage, so 1,024 leave about
// 12 MiB.
const stormSize = 1024

// stormWatch tells when a connection storm is over. Thousands of clients
// connecting at once (after a deploy, a network blip, a load balancer's
// failover) each leave net/http's buffers of their connection (4 KiB
// read, 4 KiB write, 2 KiB chunking) and their request as garbage when
// their stream takes the connection over. The Go runtime keeps such
// memory until its next collection, which an idle server runs every two
// minutes, and its scavenger then returns it at a paced rate: the storm's
// peak RSS stays for minutes. So once a storm is over the sweeper returns
// its garbage to the system (debug.FreeOSMemory: one collection, then
// every free page back), which costs one collection of the live heap per
// storm. A storm is over when at least size connections were taken over
// since memory was last returned and either none in the last
// peerCheckInterval or none of their streams is left open; a server that
// takes connections over now and then returns memory after each size of
// them, in a quiet second. Guarded by Set.mu.
type stormWatch struct {
	size       int // take-overs that make a storm
	count      int // take-overs since memory was last returned
	atLastTick int // count at the previous tick
}

// tookOver counts one connection taken over.
func (w *stormWatch) tookOver() { w.count++ }

// tick, called once per peerCheckInterval, reports whether a storm is
// over (memory is to be returned now): none was taken over since the last
// tick, or, ended, none of the streams is left open. The count then
// starts afresh.
func (w *stormWatch) tick(ended bool) (over bool) {
	over = w.count >= w.size && (ended || w.count == w.atLastTick)
	if over {
		w.count = 0
	}
	w.atLastTick = w.count
	return over
}

// stream is one open stream of a Set: its context's cancel, and the
// wake-up its follower registers while parked. Everything that ends a
// stream early (shutdown, a client that left, a revoked credential) calls
// end, which also wakes the parked follower: it needs no
// context.AfterFunc on its context, a registration that an idle stream
// would hold for as long as it is open.
type stream struct {
	cancel context.CancelFunc
	mu     sync.Mutex
	ended  bool
	onEnd  *func() // the parked follower's wake-up, or nil
}

// end cancels the stream's context and runs the wake-up registered by
// whenEnded, if any. It may be called more than once, from any goroutine.
func (st *stream) end() {
	st.cancel()
	st.mu.Lock()
	st.ended = true
	fn := st.onEnd
	st.onEnd = nil
	st.mu.Unlock()
	if fn != nil {
		(*fn)()
	}
}

// whenEnded makes end run fn, or runs it at once when the stream has
// ended; stop unregisters fn and reports whether it did so before fn ran.
// A stream holds one wake-up (its follower parks once at a time): a later
// whenEnded replaces it, and the earlier one's stop then does nothing. fn
// runs on end's goroutine: it must not block.
func (st *stream) whenEnded(fn func()) (stop func() bool) {
	st.mu.Lock()
	if st.ended {
		st.mu.Unlock()
		fn()
		return func() bool { return false }
	}
	registered := &fn
	st.onEnd = registered
	st.mu.Unlock()
	return func() bool {
		st.mu.Lock()
		defer st.mu.Unlock()
		if st.onEnd != registered {
			return false
		}
		st.onEnd = nil
		return true
	}
}

// peerCheckInterval is how often the taken-over connections are checked
// for a client that closed its end (peerClosed).
const peerCheckInterval = time.Second

// NewSet returns a Set of streams bounded by cfg (zero fields: their
// defaults).
func NewSet(cfg Config) *Set {
	cfg.setDefaults()
	set := &Set{cfg: cfg, perUser: &userStreams{max: cfg.MaxPerUser, open: make(map[string]int)},
		streams: make(map[*stream]struct{}), watched: make(map[net.Conn]*stream),
		storm: stormWatch{size: stormSize}, returnMemory: debug.FreeOSMemory}
	set.stop, set.cancel = context.WithCancel(context.Background())
	return set
}

// add registers a stream and returns its context, parent's, also ended
// by shutdown, and the stream, whose end ends it early; remove must be
// called when the stream has ended. ok is false once shutdown started.
func (set *Set) add(parent context.Context) (ctx context.Context, st *stream, ok bool) {
	set.mu.Lock()
	defer set.mu.Unlock()
	if set.closed {
		return nil, nil, false
	}
	set.wg.Add(1)
	st = &stream{}
	ctx, st.cancel = context.WithCancel(parent)
	set.streams[st] = struct{}{}
	return ctx, st, true
}

// remove unregisters st, which has ended, and cancels its context.
func (set *Set) remove(st *stream) {
	set.mu.Lock()
	delete(set.streams, st)
	set.mu.Unlock()
	st.cancel()
	set.wg.Done()
}

// watch checks conn every peerCheckInterval until unwatch, and ends st
// once its client has closed it: nothing else reads a taken-over
// connection, so without it a client that left is noticed only when a
// write fails (up to two heartbeats later). It counts conn towards a
// connection storm (stormWatch).
func (set *Set) watch(conn net.Conn, st *stream) (unwatch func()) {
	set.mu.Lock()
	defer set.mu.Unlock()
	set.watched[conn] = st
	set.storm.tookOver()
	if !set.sweeping {
		set.sweeping = true
		go set.sweep()
	}
	return func() {
		set.mu.Lock()
		defer set.mu.Unlock()
		delete(set.watched, conn)
	}
}

// sweep checks the watched connections until there are none, or
// shutdown, and returns memory to the system when a connection storm is
// over (stormWatch).
func (set *Set) sweep() {
	tick := time.NewTicker(peerCheckInterval)
	defer tick.Stop()
	var conns []net.Conn
	buf := make([]byte, 4<<10) // for what clients send: read and dropped
	for {
		select {
		case <-tick.C:
		case <-set.stop.Done():
			set.mu.Lock()
			set.sweeping = false
			set.mu.Unlock()
			return
		}
		set.mu.Lock()
		ended := len(set.watched) == 0
		stormOver := set.storm.tick(ended)
		set.sweeping = !ended
		conns = conns[:0]
		for c := range set.watched {
			conns = append(conns, c)
		}
		set.mu.Unlock()
		if stormOver {
			set.returnMemory()
		}
		if ended {
			return
		}
		for _, c := range conns {
			if peerClosed(c, buf) {
				set.mu.Lock()
				st := set.watched[c]
				set.mu.Unlock()
				if st != nil {
					st.end()
				}
			}
		}
	}
}

// shutdown cancels every stream, refuses new ones, and waits until they
// ended or ctx is done.
func (set *Set) shutdown(ctx context.Context) error {
	set.mu.Lock()
	set.closed = true
	open := make([]*stream, 0, len(set.streams))
	for st := range set.streams {
		open = append(open, st)
	}
	set.mu.Unlock()
	set.cancel()
	for _, st := range open {
		st.end()
	}
	ended := make(chan struct{})
	go func() {
		set.wg.Wait()
		close(ended)
	}()
	select {
	case <-ended:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("streams still open: %w", ctx.Err())
	}
}

// userStreams counts the open streams of each user on this instance.
type userStreams struct {
	max  int // negative: no limit
	mu   sync.Mutex
	open map[string]int
}

// acquire counts one more open stream of user, or answers RATE_LIMITED
// when user has max open. release, called once the stream ended, uncounts
// it; calling it again does nothing.
func (u *userStreams) acquire(user string) (release func(), err error) {
	if u.max < 0 {
		return func() {}, nil
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.open[user] >= u.max {
		return nil, runstream.Errorf(runstream.CodeRateLimited, "too many streams open: at most %d per user", u.max).WithDetail("limit", u.max)
	}
	u.open[user]++
	return sync.OnceFunc(func() {
		u.mu.Lock()
		defer u.mu.Unlock()
		if u.open[user]--; u.open[user] == 0 {
			delete(u.open, user)
		}
	}), nil
}
