package producer

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/internal/backoff"
	"github.com/runstream/runstream/runevents"
)

// Defaults of Config.
const (
	DefaultMaxBatchEvents = 100
	DefaultMaxBatchBytes  = 512 << 10
	DefaultLinger         = 100 * time.Millisecond
	DefaultQueueEvents    = 10_000
	DefaultMinBackoff     = 100 * time.Millisecond
	DefaultMaxBackoff     = 5 * time.Second
	DefaultRequestTimeout = 30 * time.Second
)

// ErrQueueFull is returned by Append when the queue is full and
// Config.ReportFull is set.
var ErrQueueFull = errors.New("producer: queue full")

// ErrClosed is returned by calls after Close.
var ErrClosed = errors.New("producer: closed")

// Config configures a Writer. URL is required.
type Config struct {
	// URL is the server's base URL ("http://127.0.0.1:8780"), optionally
	// with a path prefix.
	URL string
	// Client sends the requests. Defaults to an http.Client whose requests
	// time out after RequestTimeout.
	Client *http.Client
	// RequestTimeout bounds each attempt. Defaults to 30s.
	RequestTimeout time.Duration
	// Header is added to every request (Authorization, say).
	Header http.Header
	// MaxBatchEvents and MaxBatchBytes (of the request body) bound a
	// batch; default 100 events and 512 KiB. An event larger than
	// MaxBatchBytes travels alone.
	MaxBatchEvents int
	MaxBatchBytes  int
	// Linger is how long the first queued event waits for others to join
	// its batch. Defaults to 100ms.
	Linger time.Duration
	// QueueEvents bounds the queue. Defaults to 10000.
	QueueEvents int
	// ReportFull makes Append return ErrQueueFull when the queue is full;
	// by default Append blocks until there is room or ctx ends.
	ReportFull bool
	// MinBackoff and MaxBackoff bound the wait before a retry (exponential
	// with full jitter); default 100ms and 5s.
	MinBackoff, MaxBackoff time.Duration
	// Logger receives dropped batches and retries. Defaults to
	// slog.Default().
	Logger *slog.Logger
}

// Metrics are the Writer's counters.
type Metrics struct {
	// Sent counts events the server acknowledged; Batches the requests
	// that carried them.
	Sent, Batches int64
	// Retried counts attempts after a first one failed.
	Retried int64
	// Dropped counts events given up: refused by the server (a 4xx
	// other than 408, 409 and 429) or still queued when Close's context
	// ended.
	Dropped int64
	// Queued is the number of events waiting now.
	Queued int64
}

// item is an event to batch or a singleton write waiting its turn.
type item struct {
	threadID, runID string
	body            []byte // the event's ingest JSON
	single          *singleton
}

type singleton struct {
	result  chan singletonResult
	created bool
}

type singletonResult struct {
	created bool
	err     error
}

// Writer sends run events to the HTTP ingest of a runstream server:
// queued, batched per run, sent one request at a time in queue order,
// retried with the same Idempotency-Key. It is safe for concurrent use.
type Writer struct {
	cfg  Config
	base *url.URL
	log  *slog.Logger

	mu      sync.Mutex
	queue   []item
	events  int           // events in queue
	changed chan struct{} // closed and replaced when the queue changes
	closing bool
	abort   chan struct{} // closed when Close's ctx ends
	done    chan struct{} // closed when the sender returns

	sent, batches, retried, dropped atomic.Int64
}

// New starts a Writer. Close it to deliver what is queued.
func New(cfg Config) (*Writer, error) {
	base, err := url.Parse(cfg.URL)
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return nil, errors.New("producer: URL is not an absolute http(s) URL") // not the URL: it may hold a password
	}
	base.Path = strings.TrimRight(base.Path, "/")
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = DefaultRequestTimeout
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{Timeout: cfg.RequestTimeout}
	}
	if cfg.MaxBatchEvents <= 0 {
		cfg.MaxBatchEvents = DefaultMaxBatchEvents
	}
	if cfg.MaxBatchBytes <= 0 {
		cfg.MaxBatchBytes = DefaultMaxBatchBytes
	}
	if cfg.Linger <= 0 {
		cfg.Linger = DefaultLinger
	}
	if cfg.QueueEvents <= 0 {
		cfg.QueueEvents = DefaultQueueEvents
	}
	if cfg.MinBackoff <= 0 {
		cfg.MinBackoff = DefaultMinBackoff
	}
	if cfg.MaxBackoff < cfg.MinBackoff {
		cfg.MaxBackoff = max(DefaultMaxBackoff, cfg.MinBackoff)
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	w := &Writer{cfg: cfg, base: base, log: log, changed: make(chan struct{}), abort: make(chan struct{}), done: make(chan struct{})}
	go w.run()
	return w, nil
}

// Metrics returns the counters.
func (w *Writer) Metrics() Metrics {
	w.mu.Lock()
	queued := int64(w.events)
	w.mu.Unlock()
	return Metrics{Sent: w.sent.Load(), Batches: w.batches.Load(), Retried: w.retried.Load(), Dropped: w.dropped.Load(), Queued: queued}
}

// signalLocked wakes whoever waits for a queue change.
func (w *Writer) signalLocked() {
	close(w.changed)
	w.changed = make(chan struct{})
}

// Append queues events, in order, for delivery. It returns once they are
// queued, not sent: delivery errors are logged and counted (Metrics), and
// Close reports whether everything queued was delivered. When the queue has
// no room for all of them, Append blocks until it has or ctx ends, or, with
// ReportFull, returns ErrQueueFull at once; nothing is queued then. A
// batch larger than QueueEvents is refused with ErrQueueFull.
func (w *Writer) Append(ctx context.Context, events []runevents.NewEvent) error {
	items := make([]item, 0, len(events))
	for _, e := range events {
		body, err := encodeEvent(e)
		if err != nil {
			return fmt.Errorf("producer: %w", err)
		}
		items = append(items, item{threadID: e.ThreadID, runID: e.RunID, body: body})
	}
	if len(items) > w.cfg.QueueEvents {
		return ErrQueueFull
	}
	w.mu.Lock()
	for {
		if w.closing {
			w.mu.Unlock()
			return ErrClosed
		}
		if w.events+len(items) <= w.cfg.QueueEvents {
			break
		}
		if w.cfg.ReportFull {
			w.mu.Unlock()
			return ErrQueueFull
		}
		changed := w.changed
		w.mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("producer: append: %w", ctx.Err())
		}
		w.mu.Lock()
	}
	w.queue = append(w.queue, items...)
	w.events += len(items)
	w.signalLocked()
	w.mu.Unlock()
	return nil
}

// AppendIfAbsent sends e as the run's singleton of its type (POST
// …/events?if_absent=true) after every event queued before it, and reports
// whether the server created it. It waits for the answer, retrying as
// batches are retried, until ctx ends.
func (w *Writer) AppendIfAbsent(ctx context.Context, e runevents.NewEvent) (bool, error) {
	body, err := encodeEvent(e)
	if err != nil {
		return false, fmt.Errorf("producer: %w", err)
	}
	s := &singleton{result: make(chan singletonResult, 1)}
	w.mu.Lock()
	if w.closing {
		w.mu.Unlock()
		return false, ErrClosed
	}
	w.queue = append(w.queue, item{threadID: e.ThreadID, runID: e.RunID, body: body, single: s})
	w.signalLocked()
	w.mu.Unlock()
	select {
	case r := <-s.result:
		return r.created, r.err
	case <-ctx.Done():
		return false, fmt.Errorf("producer: append if absent: %w", ctx.Err())
	}
}

// PutRun writes the run row (PUT /api/threads/{t}/runs/{r}: status, model
// name, operation kind, metadata, usage and DeerFlow's assistant_id,
// kwargs, multitask_strategy, message_count and stop_reason) at once, not
// queued, retrying until ctx ends or the server refuses it. Empty members
// are left out, so the server keeps its defaults. The owner is the caller
// the server authenticates.
func (w *Writer) PutRun(ctx context.Context, run runevents.ThreadRun) error {
	if err := runevents.ValidateID("thread_id", run.ThreadID); err != nil {
		return fmt.Errorf("producer: %w", err)
	}
	if err := runevents.ValidateID("run_id", run.RunID); err != nil {
		return fmt.Errorf("producer: %w", err)
	}
	body, err := json.Marshal(struct {
		Status            runevents.RunStatus `json:"status"`
		ModelName         string              `json:"model_name,omitempty"`
		OperationKind     string              `json:"operation_kind,omitempty"`
		Metadata          json.RawMessage     `json:"metadata,omitempty"`
		AssistantID       string              `json:"assistant_id,omitempty"`
		Kwargs            json.RawMessage     `json:"kwargs,omitempty"`
		MultitaskStrategy string              `json:"multitask_strategy,omitempty"`
		MessageCount      int64               `json:"message_count,omitempty"`
		StopReason        string              `json:"stop_reason,omitempty"`
		runevents.Usage
	}{run.Status, run.ModelName, run.OperationKind, run.Metadata,
		run.AssistantID, run.Kwargs, run.MultitaskStrategy, run.MessageCount, run.StopReason, run.Usage})
	if err != nil {
		return fmt.Errorf("producer: run row: %w", err)
	}
	_, err = w.send(ctx, http.MethodPut, w.runURL(run.ThreadID, run.RunID, false, false), body, "", nil)
	return err
}

// Close stops accepting events and waits until everything queued was
// sent, in order. If ctx ends first, what is still queued is dropped
// (counted in Metrics) and Close returns ctx's error. It returns an error
// too when events were dropped during the Writer's life.
func (w *Writer) Close(ctx context.Context) error {
	w.mu.Lock()
	if !w.closing {
		w.closing = true
		w.signalLocked()
	}
	w.mu.Unlock()
	select {
	case <-w.done:
	case <-ctx.Done():
		w.mu.Lock()
		select {
		case <-w.abort:
		default:
			close(w.abort)
		}
		w.mu.Unlock()
		<-w.done
		return fmt.Errorf("producer: close: %w (%d events dropped)", ctx.Err(), w.dropped.Load())
	}
	if n := w.dropped.Load(); n > 0 {
		return fmt.Errorf("producer: close: %d events dropped", n)
	}
	return nil
}

// run is the sender: one request at a time, in queue order.
func (w *Writer) run() {
	defer close(w.done)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-w.abort:
			cancel()
		case <-w.done:
		}
	}()
	for {
		batch, single, ok := w.next(ctx)
		if !ok {
			w.dropRest()
			return
		}
		if single != nil {
			w.sendSingleton(ctx, batch[0], single)
		} else {
			w.sendBatch(ctx, batch)
		}
		w.mu.Lock()
		w.queue = w.queue[len(batch):]
		if single == nil {
			w.events -= len(batch)
		}
		w.signalLocked()
		w.mu.Unlock()
	}
}

// next waits for the next request's items: a singleton alone, or the
// queue's leading events of one run, up to the batch limits, once the batch
// is full, the first event has lingered, a singleton or another run follows,
// or the Writer is closing. ok is false when the Writer is closed and
// drained, or aborted.
func (w *Writer) next(ctx context.Context) ([]item, *singleton, bool) {
	var lingerUntil time.Time
	for {
		w.mu.Lock()
		if ctx.Err() != nil {
			w.mu.Unlock()
			return nil, nil, false
		}
		if len(w.queue) == 0 {
			if w.closing {
				w.mu.Unlock()
				return nil, nil, false
			}
			changed := w.changed
			w.mu.Unlock()
			select {
			case <-changed:
			case <-ctx.Done():
			}
			continue
		}
		first := w.queue[0]
		if first.single != nil {
			w.mu.Unlock()
			return []item{first}, first.single, true
		}
		n, size, complete := 0, len(`{"events":[]}`), false
		for _, it := range w.queue {
			if it.single != nil || it.threadID != first.threadID || it.runID != first.runID {
				complete = true
				break
			}
			if n > 0 && (n == w.cfg.MaxBatchEvents || size+1+len(it.body) > w.cfg.MaxBatchBytes) {
				complete = true
				break
			}
			n++
			size += len(it.body) + 1
		}
		if lingerUntil.IsZero() {
			lingerUntil = time.Now().Add(w.cfg.Linger)
		}
		wait := time.Until(lingerUntil)
		if complete || w.closing || wait <= 0 {
			batch := w.queue[:n:n]
			w.mu.Unlock()
			return batch, nil, true
		}
		changed := w.changed
		w.mu.Unlock()
		t := time.NewTimer(wait)
		select {
		case <-changed:
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
	}
}

func (w *Writer) dropRest() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, it := range w.queue {
		if it.single != nil {
			it.single.result <- singletonResult{err: ErrClosed}
			continue
		}
		w.dropped.Add(1)
	}
	w.queue, w.events = nil, 0
	w.signalLocked()
}

func (w *Writer) sendBatch(ctx context.Context, batch []item) {
	body := batchBody(batch)
	key := newKey()
	u := w.runURL(batch[0].threadID, batch[0].runID, true, false)
	if _, err := w.send(ctx, http.MethodPost, u, body, key, nil); err != nil {
		w.dropped.Add(int64(len(batch)))
		w.log.Error("producer: batch dropped", "thread_id", batch[0].threadID, "run_id", batch[0].runID,
			"events", len(batch), "err", err)
		return
	}
	w.sent.Add(int64(len(batch)))
	w.batches.Add(1)
}

func (w *Writer) sendSingleton(ctx context.Context, it item, s *singleton) {
	u := w.runURL(it.threadID, it.runID, true, true)
	var resp struct {
		Created bool `json:"created"`
	}
	_, err := w.send(ctx, http.MethodPost, u, batchBody([]item{it}), newKey(), &resp)
	if err == nil {
		w.sent.Add(1)
		w.batches.Add(1)
	}
	s.result <- singletonResult{created: resp.Created, err: err}
}

func batchBody(items []item) []byte {
	var b bytes.Buffer
	b.WriteString(`{"events":[`)
	for i, it := range items {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(it.body)
	}
	b.WriteString(`]}`)
	return b.Bytes()
}

// runURL is the run row's URL; with events, its events' (with ifAbsent,
// the singleton write's).
func (w *Writer) runURL(threadID, runID string, events, ifAbsent bool) string {
	u := *w.base
	u.Path += "/api/threads/" + url.PathEscape(threadID) + "/runs/" + url.PathEscape(runID)
	if events {
		u.Path += "/events"
	}
	if ifAbsent {
		u.RawQuery = "if_absent=true"
	}
	return u.String()
}

// APIError is a refusal the server answered with.
type APIError struct {
	Status    int
	Code      string `json:"code"`
	Message   string `json:"message"`
	Retryable bool   `json:"retryable"`
}

func (e *APIError) Error() string {
	return fmt.Sprintf("producer: server answered %d %s: %s", e.Status, e.Code, e.Message)
}

// As lets errors.As (and runstream.ErrorCodeOf) read the refusal as a
// *runstream.Error with the server's code, so that code written against
// the in-process service (package journal's sinks) tells refusals apart
// alike.
func (e *APIError) As(target any) bool {
	t, ok := target.(**runstream.Error)
	if ok {
		*t = &runstream.Error{Code: runstream.ErrorCode(e.Code), Message: e.Message}
	}
	return ok
}

// retryable reports whether a refusal may succeed later: 408, 425, 429
// and 5xx, and a 409 whose body says it is retryable. Other conflicts are
// final (a finished run's row, a key reused with another body): retrying
// them would only wait out the context.
func retryable(e *APIError) bool {
	switch e.Status {
	case http.StatusRequestTimeout, http.StatusTooEarly, http.StatusTooManyRequests:
		return true
	case http.StatusConflict:
		return e.Retryable
	}
	return e.Status >= 500
}

// send makes the request until it succeeds, the answer is final, or ctx
// ends; every attempt carries the same body and Idempotency-Key.
func (w *Writer) send(ctx context.Context, method, u string, body []byte, key string, into any) (int, error) {
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			w.retried.Add(1)
		}
		status, retryAfter, err := w.attempt(ctx, method, u, body, key, into)
		if err == nil {
			return status, nil
		}
		var apiErr *APIError
		if errors.As(err, &apiErr) && !retryable(apiErr) {
			return status, err
		}
		if ctx.Err() != nil {
			return 0, fmt.Errorf("producer: %w (last: %v)", ctx.Err(), err)
		}
		wait := backoff.Policy{Min: w.cfg.MinBackoff, Max: w.cfg.MaxBackoff}.Delay(attempt, retryAfter)
		w.log.Debug("producer: retrying", "url", u, "attempt", attempt+1, "wait", wait, "err", err)
		if !backoff.Sleep(ctx, wait) {
			return 0, fmt.Errorf("producer: %w (last: %v)", ctx.Err(), err)
		}
	}
}

func (w *Writer) attempt(ctx context.Context, method, u string, body []byte, key string, into any) (int, time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, w.cfg.RequestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, u, bytes.NewReader(body))
	if err != nil {
		return 0, 0, err
	}
	for name, values := range w.cfg.Header {
		for _, v := range values {
			req.Header.Add(name, v)
		}
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := w.cfg.Client.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return resp.StatusCode, 0, err
	}
	if resp.StatusCode >= 300 {
		apiErr := &APIError{Status: resp.StatusCode}
		_ = json.Unmarshal(data, apiErr)
		if apiErr.Message == "" {
			apiErr.Message = strings.TrimSpace(string(data[:min(len(data), 200)]))
		}
		return resp.StatusCode, backoff.RetryAfter(resp.Header), apiErr
	}
	if into != nil {
		if err := json.Unmarshal(data, into); err != nil {
			return resp.StatusCode, 0, fmt.Errorf("producer: decode answer: %w", err)
		}
	}
	return resp.StatusCode, 0, nil
}

// encodeEvent is an event in the ingest's form.
func encodeEvent(e runevents.NewEvent) ([]byte, error) {
	if err := runevents.ValidateID("thread_id", e.ThreadID); err != nil {
		return nil, err
	}
	if err := runevents.ValidateID("run_id", e.RunID); err != nil {
		return nil, err
	}
	v := struct {
		EventType string          `json:"event_type"`
		Category  string          `json:"category,omitempty"`
		Content   json.RawMessage `json:"content,omitempty"`
		Metadata  json.RawMessage `json:"metadata,omitempty"`
		CreatedAt string          `json:"created_at,omitempty"`
	}{EventType: string(e.EventType), Category: string(e.Category), Content: e.Content, Metadata: e.Metadata}
	if !e.CreatedAt.IsZero() {
		v.CreatedAt = e.CreatedAt.Format(runevents.CreatedAtLayout)
	}
	return json.Marshal(v)
}

func newKey() string {
	var b [16]byte
	_, _ = crand.Read(b[:]) // crypto/rand never fails
	return "rs-" + hex.EncodeToString(b[:])
}
