package httpapi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/runstream/runstream"
)

// A stream answers with 200 and the SSE headers, then its follower's
// frames. On an HTTP/1.x connection the stream takes the connection over
// from net/http (http.ResponseController.Hijack), writes the response head
// and chunked body itself, and the handler returns: an idle stream then
// costs one goroutine with a shallow stack, its subscription and the
// connection, instead of net/http's two goroutines per connection and its
// read, write and chunking buffers. Where a connection cannot be taken
// over (HTTP/2, a ResponseWriter of a test) the follower writes through
// the ResponseWriter on the handler's goroutine. Both write the same
// bytes; the taken-over connection closes when the stream ends.
//
// A taken-over connection is not read again: a client that leaves is
// noticed when a write to it fails, at the latest at the second heartbeat
// after it left. Server.Shutdown ends the taken-over streams, which
// http.Server.Shutdown does not know of.

// streamWriter is where a follower's bytes go.
type streamWriter interface {
	// send writes p to the client and flushes it, failing when the client
	// does not take it by deadline.
	send(p []byte, deadline time.Time) error
}

// responseStream sends through net/http's ResponseWriter.
type responseStream struct {
	w  io.Writer
	rc *http.ResponseController
}

func (s responseStream) send(p []byte, deadline time.Time) error {
	if err := s.rc.SetWriteDeadline(deadline); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	if _, err := s.w.Write(p); err != nil {
		return err
	}
	if err := s.rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	return nil
}

// connStream sends on a connection taken over from net/http: the response
// head with the first bytes, then each send as one HTTP/1.1 chunk (for an
// HTTP/1.0 client the body is delimited by the connection's close).
type connStream struct {
	conn    net.Conn
	head    []byte // the response head, until it is sent
	chunked bool
	written int64 // body bytes sent, framing excluded
	// size and bufs are send's, kept to spare it two allocations a write.
	size []byte
	bufs [4][]byte
}

var (
	crlf      = []byte("\r\n")
	lastChunk = []byte("0\r\n\r\n")
)

// newConnStream returns the connStream of a request answered 200 with
// header on conn.
func newConnStream(conn net.Conn, r *http.Request, header http.Header) *connStream {
	c := &connStream{conn: conn, chunked: r.ProtoAtLeast(1, 1)}
	var head bytes.Buffer
	if c.chunked {
		head.WriteString("HTTP/1.1 200 OK\r\n")
		header.Set("Transfer-Encoding", "chunked")
	} else {
		head.WriteString("HTTP/1.0 200 OK\r\n")
	}
	header.Set("Connection", "close")
	header.Set("Date", time.Now().UTC().Format(http.TimeFormat))
	header.Write(&head) // sorted, values sanitised; never fails on a Buffer
	head.WriteString("\r\n")
	c.head = head.Bytes()
	return c
}

func (c *connStream) send(p []byte, deadline time.Time) error {
	if err := c.conn.SetWriteDeadline(deadline); err != nil {
		return err
	}
	// Everything pending goes in one write: head, chunk size, data, CRLF.
	bufs := net.Buffers(c.bufs[:0])
	if c.head != nil {
		bufs = append(bufs, c.head)
		c.head = nil
	}
	if c.chunked {
		c.size = append(strconv.AppendInt(c.size[:0], int64(len(p)), 16), crlf...)
		bufs = append(bufs, c.size, p, crlf)
	} else {
		bufs = append(bufs, p)
	}
	_, err := writeBuffers(c.conn, bufs)
	c.bufs = [4][]byte{} // keep no reference to p
	if err != nil {
		return err
	}
	c.written += int64(len(p))
	return nil
}

// writeBuffers writes bufs to conn: with one writev on a TCP connection,
// else as one Write (on TLS, one record rather than one per buffer).
func writeBuffers(conn net.Conn, bufs net.Buffers) (int64, error) {
	if _, ok := conn.(*net.TCPConn); ok {
		return bufs.WriteTo(conn)
	}
	n, err := conn.Write(bytes.Join(bufs, nil))
	return int64(n), err
}

// close ends the body with its last chunk when the stream ended cleanly
// (a client then tells a finished response from a broken connection), and
// closes the connection.
func (c *connStream) close(clean bool, deadline time.Time) error {
	if clean && c.chunked && c.head == nil {
		if err := c.conn.SetWriteDeadline(deadline); err == nil {
			c.conn.Write(lastChunk)
		}
	}
	return c.conn.Close()
}

// streamSet tracks the open streams, so that Shutdown can end them and
// wait for them, and watches the connections taken over, so that a stream
// whose client left ends within peerCheckInterval.
type streamSet struct {
	mu     sync.Mutex
	closed bool
	// stop is cancelled by shutdown; every stream's context follows it.
	stop   context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	// watched are the taken-over connections and the cancel of their
	// stream's context; a sweeper runs while there are any.
	watched  map[net.Conn]context.CancelFunc
	sweeping bool
}

// peerCheckInterval is how often the taken-over connections are checked
// for a client that closed its end (peerClosed).
const peerCheckInterval = time.Second

func newStreamSet() *streamSet {
	set := &streamSet{watched: make(map[net.Conn]context.CancelFunc)}
	set.stop, set.cancel = context.WithCancel(context.Background())
	return set
}

// add registers a stream and returns its context, parent's, also
// cancelled by shutdown, and cancel, which ends the stream early; done
// must be called when the stream has ended. ok is false once shutdown
// started.
func (set *streamSet) add(parent context.Context) (ctx context.Context, cancel context.CancelFunc, done func(), ok bool) {
	set.mu.Lock()
	defer set.mu.Unlock()
	if set.closed {
		return nil, nil, nil, false
	}
	set.wg.Add(1)
	ctx, cancel = context.WithCancel(parent)
	unlink := context.AfterFunc(set.stop, cancel)
	return ctx, cancel, func() {
		unlink()
		cancel()
		set.wg.Done()
	}, true
}

// watch checks conn every peerCheckInterval until unwatch, and calls
// cancel once its client has closed it: nothing else reads a taken-over
// connection, so without it a client that left is noticed only when a
// write fails (up to two heartbeats later).
func (set *streamSet) watch(conn net.Conn, cancel context.CancelFunc) (unwatch func()) {
	set.mu.Lock()
	defer set.mu.Unlock()
	set.watched[conn] = cancel
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

// sweep checks the watched connections until there are none, or shutdown.
func (set *streamSet) sweep() {
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
		if len(set.watched) == 0 {
			set.sweeping = false
			set.mu.Unlock()
			return
		}
		conns = conns[:0]
		for c := range set.watched {
			conns = append(conns, c)
		}
		set.mu.Unlock()
		for _, c := range conns {
			if peerClosed(c, buf) {
				set.mu.Lock()
				cancel := set.watched[c]
				set.mu.Unlock()
				if cancel != nil {
					cancel()
				}
			}
		}
	}
}

// shutdown cancels every stream, refuses new ones, and waits until they
// ended or ctx is done.
func (set *streamSet) shutdown(ctx context.Context) error {
	set.mu.Lock()
	set.closed = true
	set.mu.Unlock()
	set.cancel()
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

// Shutdown ends the SSE streams, those that took their connection over
// from net/http included (http.Server.Shutdown neither closes nor waits
// for them), and answers later stream requests UNAVAILABLE. It returns
// when the streams have ended, or with ctx's error. Call it with or after
// http.Server.Shutdown.
func (s *Server) Shutdown(ctx context.Context) error { return s.streams.shutdown(ctx) }

// serveStream answers a stream request: it subscribes to the hub, then
// its follower replays src from the store after cursor and goes on live
// (registered first, so an event committed during the replay is either
// read by it or delivered live), until the stream ends. what names the
// stream in logs. It returns an error, with nothing written and nothing
// subscribed, when the caller has too many streams open or the server is
// shutting down; a HEAD request gets the headers only.
func (s *Server) serveStream(w http.ResponseWriter, r *http.Request, src streamSource, cursor int64, what slog.Attr) error {
	release, err := s.perUser.acquire(userOf(r))
	s.countLimit("streams", err)
	if err != nil {
		s.setRetryAfter(w)
		return err
	}
	setStreamHeaders(w.Header())
	if r.Method == http.MethodHead {
		release()
		w.WriteHeader(http.StatusOK)
		return nil
	}
	// A stream taken over outlives its request: its context keeps the
	// request's values, not its cancellation.
	ctx, cancel, done, ok := s.streams.add(context.WithoutCancel(r.Context()))
	if !ok {
		release()
		s.setRetryAfter(w)
		return runstream.Errorf(runstream.CodeUnavailable, "the server is shutting down")
	}
	f := &follower{cfg: s.streamConfig(r), sub: src.Subscribe(cursor), src: src, cursor: cursor, dense: src.Dense()}
	if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
		out := newConnStream(conn, r, w.Header())
		f.out = out
		finish := detachAccess(r)
		go func() {
			defer done()
			unwatch := s.streams.watch(conn, cancel)
			clean := s.follow(ctx, f, what, release)
			unwatch()
			out.close(clean, time.Now().Add(f.cfg.WriteTimeout))
			if finish != nil {
				finish(http.StatusOK, out.written)
			}
		}()
		return nil
	}
	// Not an HTTP/1.x connection: stay with net/http, and end with the
	// request too.
	defer done()
	stop := context.AfterFunc(r.Context(), cancel)
	defer stop()
	w.WriteHeader(http.StatusOK)
	f.out = responseStream{w: w, rc: http.NewResponseController(w)}
	s.follow(ctx, f, what, release)
	return nil
}

// setRetryAfter tells a refused stream request to come back after the
// streams' retry delay, in whole seconds.
func (s *Server) setRetryAfter(w http.ResponseWriter) {
	w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(s.cfg.Stream.Retry.Seconds()))))
}

// follow runs f until its stream ends, then closes its subscription and
// calls release. It reports whether the stream ended cleanly (terminal
// event, lifetime, cancelled by shutdown or by a client that left) rather
// than by an error; an error of a stream whose context is still live is
// logged, a panic too.
func (s *Server) follow(ctx context.Context, f *follower, what slog.Attr, release func()) (clean bool) {
	defer release()
	defer f.sub.Close()
	var err error
	func() {
		defer recoverInto(&err)
		err = f.run(ctx)
	}()
	if err != nil && ctx.Err() == nil {
		level := slog.LevelInfo // a client that left or fell behind: it resumes
		if errors.As(err, new(panicError)) {
			level = slog.LevelError
		}
		s.logger.LogAttrs(ctx, level, "stream cut", slog.String("request_id", requestID(ctx)),
			what, slog.Int64("cursor", f.cursor), slog.Any("error", err))
	}
	return err == nil || ctx.Err() != nil
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
