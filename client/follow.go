package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"mime"
	"net/http"
	"strconv"
	"time"

	"github.com/runstream/runstream/sse"
	"github.com/runstream/runstream/workflow"
)

// Defaults of the reconnection backoff.
const (
	// DefaultRetry is the base reconnection delay until the server sends a
	// "retry:" hint.
	DefaultRetry = 3 * time.Second
	// DefaultMaxBackoff is the default of FollowOptions.MaxBackoff.
	DefaultMaxBackoff = 30 * time.Second
)

// ErrSeqGap is the cause of a reconnection after the server sent an event
// whose seq is not the next one. The server never does; Follow reconnects
// from the last seq it yielded, so a gap costs a reconnection, never an
// event.
var ErrSeqGap = errors.New("gap in event seq")

// errClosed is the cause of a reconnection after the server closed the
// stream before the terminal event.
var errClosed = errors.New("stream closed before the terminal event")

// FollowOptions configure Follow.
type FollowOptions struct {
	// After is the seq to follow after: the first event yielded is After+1.
	// Defaults to 0, the run's first event.
	After int64
	// MaxBackoff caps the delay between reconnections. Defaults to
	// DefaultMaxBackoff.
	MaxBackoff time.Duration
	// MaxRetries is how many reconnections in a row without progress (no
	// new event, no heartbeat) Follow makes before it gives up with the last
	// cause. Defaults to 0, unlimited.
	MaxRetries int
}

// Follow streams the events of run runID after opts.After, each exactly
// once and in seq order, until the run's terminal event (run.completed,
// run.failed or run.cancelled) has been yielded.
//
// The sequence is a range-over-func iterator; every range over it opens a
// new stream from opts.After. A non-nil error is final: it is yielded with
// a zero Envelope and the sequence ends. Errors are:
//   - an *APIError for a 4xx answer other than 429 (CodeWorkflowRunNotFound
//     for an unknown run, CodeWorkflowInvalidCursor for a bad cursor), which
//     is never retried;
//   - a malformed frame or a response that is not an event stream;
//   - the context's error once ctx is done (checked at every wait);
//   - with MaxRetries set, the last cause once the retries are spent.
//
// The sequence ends without error after the terminal event, when the caller
// stops ranging, or when the stream closes at once on a run that is already
// terminal at or before opts.After (nothing is left to yield).
//
// On any disconnection before the terminal event (the server closing the
// stream, a network error, a 429 or 5xx answer) Follow reconnects with
// Last-Event-ID set to the last seq it yielded. Before reconnection attempt
// n it waits a random delay in [0, min(MaxBackoff, base·2^(n-1))] (full
// jitter), where base is the server's latest "retry:" hint (DefaultRetry
// until one is read); n restarts from 1 after a connection that delivered a
// new event or a heartbeat. Frames with a seq already yielded are dropped; a
// frame that skips a seq makes Follow reconnect (ErrSeqGap).
//
// A run that ended without storing a terminal event gets a terminal event
// synthesised by the server: it is yielded like any other and ends the
// sequence, but its Seq is one past the run's last stored seq, which no
// event takes, and it is never stored. IsSynthesised tells it apart.
func (c *Client) Follow(ctx context.Context, runID string, opts FollowOptions) iter.Seq2[workflow.Envelope, error] {
	return func(yield func(workflow.Envelope, error) bool) {
		if runID == "" {
			yield(workflow.Envelope{}, errNoRunID)
			return
		}
		if opts.After < 0 {
			yield(workflow.Envelope{}, fmt.Errorf("follow run %s: negative After %d", runID, opts.After))
			return
		}
		if opts.MaxBackoff <= 0 {
			opts.MaxBackoff = DefaultMaxBackoff
		}
		f := &follower{c: c, runID: runID, opts: opts, last: opts.After, retry: DefaultRetry}
		f.run(ctx, yield)
	}
}

// IsSynthesised reports whether env is a terminal event the server
// synthesised, with data.synthesised true, for a run that ended without
// storing one.
func IsSynthesised(env workflow.Envelope) bool {
	if !env.Event.Terminal() {
		return false
	}
	var data struct {
		Synthesised bool `json:"synthesised"`
	}
	return json.Unmarshal(env.Data, &data) == nil && data.Synthesised
}

// follower is the state of one Follow sequence.
type follower struct {
	c     *Client
	runID string
	opts  FollowOptions
	// last is the seq of the last event yielded, or opts.After.
	last int64
	// retry is the server's latest "retry:" hint.
	retry time.Duration
}

// yieldFunc is the yield of a Follow sequence.
type yieldFunc = func(workflow.Envelope, error) bool

// run connects and reconnects until the sequence ends.
func (f *follower) run(ctx context.Context, yield yieldFunc) {
	attempt := 0
	for {
		done, progress, cause := f.connect(ctx, yield)
		if done {
			return
		}
		if ctx.Err() != nil {
			f.fail(yield, ctx.Err())
			return
		}
		if cause == nil {
			if !progress && f.runOver(ctx) {
				return
			}
			cause = errClosed
		}
		if progress {
			attempt = 0
		}
		attempt++
		if f.opts.MaxRetries > 0 && attempt > f.opts.MaxRetries {
			f.fail(yield, fmt.Errorf("gave up after %d retries: %w", f.opts.MaxRetries, cause))
			return
		}
		delay := backoff(f.retry, f.opts.MaxBackoff, attempt, f.c.jitter)
		f.c.logger.Info("workflow stream interrupted, reconnecting",
			"run_id", f.runID, "last_seq", f.last, "attempt", attempt, "delay", delay, "error", cause)
		if err := sleep(ctx, delay); err != nil {
			f.fail(yield, err)
			return
		}
	}
}

// fail yields the final error err.
func (f *follower) fail(yield yieldFunc, err error) {
	yield(workflow.Envelope{}, fmt.Errorf("follow run %s: %w", f.runID, err))
}

// runOver reports whether the run is terminal with no event after the
// cursor, so a stream the server closed without a frame has nothing to
// resume. Errors report false: the follower reconnects and meets them there.
func (f *follower) runOver(ctx context.Context) bool {
	run, err := f.c.GetRun(ctx, f.runID)
	return err == nil && run.Status.Terminal() && run.LastSeq <= f.last
}

// connect opens one stream and yields its new events. It reports done when
// the sequence must end: the terminal event or a final error was yielded, or
// the caller stopped. Otherwise cause is why the stream ended (nil for a
// clean close) and progress whether it delivered a new event or a
// heartbeat.
func (f *follower) connect(ctx context.Context, yield yieldFunc) (done, progress bool, cause error) {
	req, err := f.c.newRequest(ctx, runPath(f.runID, "/stream"), nil)
	if err != nil {
		f.fail(yield, err)
		return true, false, nil
	}
	req.Header.Set("Accept", "text/event-stream")
	if f.last > 0 {
		req.Header.Set("Last-Event-ID", strconv.FormatInt(f.last, 10))
	}
	resp, err := f.c.http.Do(req)
	if err != nil {
		return false, false, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		apiErr := readAPIError(resp)
		if retryableStatus(resp.StatusCode) {
			return false, false, apiErr
		}
		f.fail(yield, apiErr)
		return true, false, nil
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "text/event-stream" {
		f.fail(yield, fmt.Errorf("response Content-Type is %q, not text/event-stream", resp.Header.Get("Content-Type")))
		return true, false, nil
	}
	// Closing the body ends a blocked read even through a transport that
	// does not watch the request's context.
	stop := context.AfterFunc(ctx, func() { resp.Body.Close() })
	defer stop()

	r := sse.NewReader(resp.Body)
	r.Comments = true
	for {
		ev, err := r.Next()
		if d := r.Retry(); d > 0 {
			f.retry = d
		}
		if err == io.EOF {
			return false, progress, nil
		}
		if err != nil {
			return false, progress, err
		}
		if ev.IsComment {
			progress = true // a heartbeat: the connection is healthy
			continue
		}
		var env workflow.Envelope
		if err := json.Unmarshal([]byte(ev.Data), &env); err != nil {
			f.fail(yield, fmt.Errorf("frame after seq %d: %w", f.last, err))
			return true, progress, nil
		}
		if !ev.HasID && env.Event.Terminal() {
			// A synthesised terminal frame: no id, and a seq that no
			// stored event has (one past the last).
			yield(env, nil)
			return true, true, nil
		}
		switch {
		case env.Seq <= f.last:
			f.c.logger.Debug("dropped a duplicate workflow event", "run_id", f.runID, "seq", env.Seq, "last_seq", f.last)
			continue
		case env.Seq != f.last+1:
			f.c.logger.Warn("gap in workflow event seq", "run_id", f.runID, "seq", env.Seq, "last_seq", f.last)
			return false, progress, fmt.Errorf("%w: seq %d after %d", ErrSeqGap, env.Seq, f.last)
		}
		progress = true
		f.last = env.Seq
		if !yield(env, nil) || env.Event.Terminal() {
			return true, true, nil
		}
	}
}

// backoff returns the delay before reconnection attempt n (from 1): jitter
// of min(limit, base·2^(n-1)).
func backoff(base, limit time.Duration, n int, jitter func(time.Duration) time.Duration) time.Duration {
	ceiling := min(base, limit)
	for i := 1; i < n && ceiling < limit; i++ {
		if ceiling > limit/2 {
			ceiling = limit
		} else {
			ceiling *= 2
		}
	}
	return jitter(ceiling)
}

// sleep waits for d, or returns ctx's error once ctx is done.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
