package chunkpush

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/runstream/runstream/internal/backoff"
)

// Defaults of Config.
const (
	DefaultMaxBatchChunks = 200
	DefaultMaxBatchBytes  = 1 << 20
	DefaultMaxChunkBytes  = 4 << 20
	DefaultLinger         = 50 * time.Millisecond
	DefaultMaxPending     = 10_000
	DefaultRetainAcked    = 1_000
	DefaultHeartbeat      = 10 * time.Second
	DefaultControlWait    = 25 * time.Second
	DefaultMinBackoff     = 100 * time.Millisecond
	DefaultMaxBackoff     = 5 * time.Second
	DefaultRequestTimeout = 30 * time.Second
)

// Terminal statuses of a run, for End.
const (
	StatusSuccess     = "success"
	StatusError       = "error"
	StatusTimeout     = "timeout"
	StatusInterrupted = "interrupted"
)

var (
	// ErrFenced: another worker took the run over with a greater epoch.
	ErrFenced = errors.New("chunkpush: fenced: the run was taken over with a greater epoch")
	// ErrGap: the server lost chunks this Stream no longer keeps.
	ErrGap = errors.New("chunkpush: gap: the server expects chunks this stream no longer keeps")
	// ErrEnded: Open found the run ended already.
	ErrEnded = errors.New("chunkpush: the run has ended")
	// ErrClosed is returned by calls after Close or after the end was
	// acknowledged.
	ErrClosed = errors.New("chunkpush: closed")
	// ErrChunkTooLarge is Push's refusal of a chunk whose data is larger
	// than Config.MaxChunkBytes; the Stream goes on.
	ErrChunkTooLarge = errors.New("chunkpush: the chunk's data is larger than MaxChunkBytes")
)

// Config configures a Stream. URL, ThreadID and RunID are required.
type Config struct {
	// URL is the server's base URL ("http://127.0.0.1:8780"), optionally
	// with a path prefix.
	URL string
	// Client sends the requests. Defaults to an http.Client without a
	// Timeout of its own (a Timeout set here must exceed ControlWait).
	Client *http.Client
	// RequestTimeout bounds each push attempt, and each control poll
	// beyond its wait. Defaults to 30s.
	RequestTimeout time.Duration
	// Header is added to every request (Authorization, say).
	Header http.Header
	// ThreadID and RunID name the run.
	ThreadID, RunID string
	// Epoch is this worker's epoch: 1 for the first worker of a run, one
	// more for each takeover. Defaults to 1.
	Epoch int64
	// MaxBatchChunks and MaxBatchBytes (of the chunks' JSON) bound a
	// request; default 200 chunks and 1 MiB. A larger chunk travels alone.
	MaxBatchChunks, MaxBatchBytes int
	// MaxChunkBytes is the largest data (JSON) of one chunk Push takes:
	// the server refuses a larger one, which would end the Stream, so Push
	// refuses it first (ErrChunkTooLarge). Defaults to
	// DefaultMaxChunkBytes, the server's default and least limit; raise it
	// with the server's --max-chunk-bytes.
	MaxChunkBytes int
	// Linger is how long the first waiting chunk waits for others to join
	// its batch. Defaults to 50ms.
	Linger time.Duration
	// MaxPending bounds the chunks not yet acknowledged. Defaults to 10000.
	MaxPending int
	// RetainAcked is how many acknowledged chunks are kept to send again
	// when the server answers a gap. Defaults to 1000; negative keeps none.
	RetainAcked int
	// Heartbeat is the longest time without a push: an empty one renews
	// the run's lease. Defaults to 10s.
	Heartbeat time.Duration
	// ControlWait is the wait of the control long-poll; defaults to 25s.
	// Negative: no long-poll (cancel requests arrive in push answers only).
	ControlWait time.Duration
	// MinBackoff and MaxBackoff bound the wait before a retry (exponential
	// with full jitter); default 100ms and 5s.
	MinBackoff, MaxBackoff time.Duration
	// Logger receives retries. Defaults to slog.Default().
	Logger *slog.Logger
}

// Cancel is a cancel request a user made on the run.
type Cancel struct {
	Action      string    `json:"action"` // "interrupt" or "rollback"
	RequestedAt time.Time `json:"requested_at"`
}

// Answer is the server's answer to a push or a control poll.
type Answer struct {
	RunID     string  `json:"run_id"`
	ThreadID  string  `json:"thread_id"`
	Epoch     int64   `json:"epoch"`
	NextIndex int64   `json:"next_index"`
	Status    string  `json:"status"`
	Cancel    *Cancel `json:"cancel"`
}

// RunError is the error of a run that ended with StatusError.
type RunError struct {
	Message string `json:"message"`
	Name    string `json:"name"`
}

// APIError is a final answer of the server.
type APIError struct {
	Status  int
	Code    string
	Message string
	// ExpectedIndex is the next index the server expects, from a 409 gap
	// answer, or -1.
	ExpectedIndex int64
}

func (e *APIError) Error() string {
	return fmt.Sprintf("chunkpush: HTTP %d %s: %s", e.Status, e.Code, e.Message)
}

type chunk struct {
	body []byte // {"event":…,"data":…}
}

type endRequest struct {
	Status string    `json:"status"`
	Error  *RunError `json:"error,omitempty"`
}

// Stream pushes the chunks of one run. It is safe for concurrent use.
type Stream struct {
	cfg       Config
	pushURL   string
	ctrlURL   string
	log       *slog.Logger
	cancels   chan Cancel
	stop      chan struct{} // closed by Close
	done      chan struct{} // closed when the sender returns
	ctrlDone  chan struct{} // closed when the long-poll returns
	closeOnce sync.Once

	mu         sync.Mutex
	changed    chan struct{} // closed and replaced when the state changes
	retained   []chunk       // acknowledged, indexes acked-len(retained) … acked-1
	pending    []chunk       // not acknowledged, indexes acked …
	acked      int64         // the server's next_index as last known
	end        *endRequest
	ended      bool // the end was acknowledged
	last       Answer
	err        error
	lastCancel Cancel
}

// Open creates the run on the server if it is new (or takes it over with
// a greater epoch) with a first, empty push, and starts the sender and the
// control long-poll. The first chunk pushed gets the run's next_index,
// which NextIndex reports. Open retries like a push until ctx ends.
func Open(ctx context.Context, cfg Config) (*Stream, error) {
	base, err := url.Parse(cfg.URL)
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return nil, errors.New("chunkpush: URL is not an absolute http(s) URL") // not the URL: it may hold a password
	}
	if cfg.ThreadID == "" || cfg.RunID == "" {
		return nil, errors.New("chunkpush: ThreadID and RunID are required")
	}
	cfg = withDefaults(cfg)
	prefix := strings.TrimRight(base.String(), "/") + "/api/runs/" + url.PathEscape(cfg.RunID)
	s := &Stream{
		cfg:      cfg,
		pushURL:  prefix + "/stream-chunks",
		ctrlURL:  prefix + "/stream-control",
		log:      cfg.Logger,
		cancels:  make(chan Cancel, 1),
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
		ctrlDone: make(chan struct{}),
		changed:  make(chan struct{}),
	}
	ctx, cancel := s.withStop(ctx)
	defer cancel()
	ans, err := s.sendBatch(ctx, 0, nil, nil, true)
	if err != nil {
		return nil, err
	}
	if terminal(ans.Status) {
		return nil, fmt.Errorf("%w (status %s)", ErrEnded, ans.Status)
	}
	go s.run()
	if cfg.ControlWait > 0 {
		go s.poll()
	} else {
		close(s.ctrlDone)
	}
	return s, nil
}

func withDefaults(cfg Config) Config {
	if cfg.Epoch <= 0 {
		cfg.Epoch = 1
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = DefaultRequestTimeout
	}
	if cfg.ControlWait == 0 {
		cfg.ControlWait = DefaultControlWait
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{}
	}
	if cfg.MaxBatchChunks <= 0 {
		cfg.MaxBatchChunks = DefaultMaxBatchChunks
	}
	if cfg.MaxBatchBytes <= 0 {
		cfg.MaxBatchBytes = DefaultMaxBatchBytes
	}
	if cfg.MaxChunkBytes <= 0 {
		cfg.MaxChunkBytes = DefaultMaxChunkBytes
	}
	if cfg.Linger <= 0 {
		cfg.Linger = DefaultLinger
	}
	if cfg.MaxPending <= 0 {
		cfg.MaxPending = DefaultMaxPending
	}
	if cfg.RetainAcked == 0 {
		cfg.RetainAcked = DefaultRetainAcked
	}
	if cfg.Heartbeat <= 0 {
		cfg.Heartbeat = DefaultHeartbeat
	}
	if cfg.MinBackoff <= 0 {
		cfg.MinBackoff = DefaultMinBackoff
	}
	if cfg.MaxBackoff < cfg.MinBackoff {
		cfg.MaxBackoff = max(DefaultMaxBackoff, cfg.MinBackoff)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return cfg
}

// withStop returns ctx, also cancelled by Close.
func (s *Stream) withStop(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		select {
		case <-s.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

// signalLocked wakes whoever waits for a state change.
func (s *Stream) signalLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// Cancels delivers each cancel request of the run once (a later one
// replaces one the caller has not received yet).
func (s *Stream) Cancels() <-chan Cancel { return s.cancels }

// NextIndex is the index the next pushed chunk gets.
func (s *Stream) NextIndex() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.acked + int64(len(s.pending))
}

// Last returns the last answer of the server.
func (s *Stream) Last() Answer {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last
}

// Err returns the error that stopped the Stream, if any.
func (s *Stream) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Push queues one chunk (its data is marshalled to JSON; a
// json.RawMessage is sent as it is) and returns its index. It blocks while
// MaxPending chunks wait for acknowledgement, until ctx ends.
func (s *Stream) Push(ctx context.Context, event string, data any) (int64, error) {
	if event == "" {
		return 0, errors.New("chunkpush: empty event")
	}
	raw, err := json.Marshal(data)
	if err != nil {
		return 0, fmt.Errorf("chunkpush: %s data: %w", event, err)
	}
	if len(raw) > s.cfg.MaxChunkBytes {
		return 0, fmt.Errorf("%w: %s data of %d bytes, at most %d", ErrChunkTooLarge, event, len(raw), s.cfg.MaxChunkBytes)
	}
	body, err := json.Marshal(struct {
		Event string          `json:"event"`
		Data  json.RawMessage `json:"data"`
	}{event, raw})
	if err != nil {
		return 0, fmt.Errorf("chunkpush: %s data: %w", event, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		switch {
		case s.err != nil:
			return 0, s.err
		case s.end != nil || s.isStopped():
			return 0, ErrClosed
		case len(s.pending) < s.cfg.MaxPending:
			s.pending = append(s.pending, chunk{body: body})
			s.signalLocked()
			return s.acked + int64(len(s.pending)) - 1, nil
		}
		changed := s.changed
		s.mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
			s.mu.Lock()
			return 0, ctx.Err()
		}
		s.mu.Lock()
	}
}

func (s *Stream) isStopped() bool {
	select {
	case <-s.stop:
		return true
	default:
		return false
	}
}

// End sends the chunks not yet acknowledged and the run's terminal status
// (with runErr for StatusError) and waits for the server's answer, retrying
// until ctx ends; then it stops the Stream. If ctx ends first, the Stream is
// closed without an end: the server's lease sweeper ends the run.
func (s *Stream) End(ctx context.Context, status string, runErr *RunError) (Answer, error) {
	if !terminal(status) {
		return Answer{}, fmt.Errorf("chunkpush: end status %q is not success, error, timeout or interrupted", status)
	}
	s.mu.Lock()
	if s.end == nil && s.err == nil {
		s.end = &endRequest{Status: status, Error: runErr}
		s.signalLocked()
	}
	s.mu.Unlock()
	select {
	case <-s.done:
	case <-ctx.Done():
		s.Close()
		return Answer{}, fmt.Errorf("chunkpush: end: %w", ctx.Err())
	}
	s.Close()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return s.last, s.err
	}
	if !s.ended {
		return s.last, ErrClosed
	}
	return s.last, nil
}

// Close stops the Stream without an end; chunks not acknowledged are
// dropped. It waits for the sender and the long-poll to return.
func (s *Stream) Close() {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		close(s.stop)
		s.signalLocked()
		s.mu.Unlock()
	})
	<-s.done
	<-s.ctrlDone
}

// run is the sender: one request at a time.
func (s *Stream) run() {
	defer close(s.done)
	ctx, cancel := s.withStop(context.Background())
	defer cancel()
	for {
		first, batch, end, ok := s.next(ctx)
		if !ok {
			return
		}
		ans, err := s.sendBatch(ctx, first, batch, end, false)
		if errors.Is(err, errRewound) {
			continue
		}
		if err != nil {
			return
		}
		if end != nil && ans.NextIndex >= first+int64(len(batch)) {
			s.mu.Lock()
			s.ended = true
			s.signalLocked()
			s.mu.Unlock()
			return
		}
	}
}

// next waits for the next request: the leading pending chunks up to the
// batch limits once the batch is full, its first chunk lingered or the end
// is asked (with the end when they are all the pending chunks), or an empty
// heartbeat when nothing was sent for Heartbeat. ok is false when the
// Stream stops.
func (s *Stream) next(ctx context.Context) (first int64, batch []chunk, end *endRequest, ok bool) {
	var lingerUntil time.Time
	heartbeat := time.Now().Add(s.cfg.Heartbeat)
	for {
		s.mu.Lock()
		if ctx.Err() != nil || s.err != nil {
			s.mu.Unlock()
			return 0, nil, nil, false
		}
		n, size := 0, 0
		for _, c := range s.pending {
			if n > 0 && (n == s.cfg.MaxBatchChunks || size+len(c.body) > s.cfg.MaxBatchBytes) {
				break
			}
			n++
			size += len(c.body)
		}
		if n > 0 && lingerUntil.IsZero() {
			lingerUntil = time.Now().Add(s.cfg.Linger)
		}
		full := n < len(s.pending) || n == s.cfg.MaxBatchChunks || size >= s.cfg.MaxBatchBytes
		now := time.Now()
		switch {
		case s.end != nil || (n > 0 && (full || !now.Before(lingerUntil))) || !now.Before(heartbeat):
			first, batch = s.acked, s.pending[:n:n]
			if n == len(s.pending) {
				end = s.end
			}
			s.mu.Unlock()
			return first, batch, end, true
		}
		wait := time.Until(heartbeat)
		if n > 0 {
			wait = min(wait, time.Until(lingerUntil))
		}
		changed := s.changed
		s.mu.Unlock()
		t := time.NewTimer(wait)
		select {
		case <-changed:
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
	}
}

// pushBody is the push request.
type pushBody struct {
	ThreadID   string            `json:"thread_id"`
	Epoch      int64             `json:"epoch"`
	FirstIndex int64             `json:"first_index"`
	Chunks     []json.RawMessage `json:"chunks"`
	End        *endRequest       `json:"end,omitempty"`
}

// sendBatch pushes chunks first… (and end), retrying, and applies the
// answer: acknowledged chunks leave pending, a gap rewinds to the expected
// index. open marks Open's first push, which sets the starting index. A
// final error fails the Stream and is returned.
func (s *Stream) sendBatch(ctx context.Context, first int64, batch []chunk, end *endRequest, open bool) (Answer, error) {
	chunks := make([]json.RawMessage, len(batch))
	for i, c := range batch {
		chunks[i] = c.body
	}
	body, err := json.Marshal(pushBody{ThreadID: s.cfg.ThreadID, Epoch: s.cfg.Epoch, FirstIndex: first, Chunks: chunks, End: end})
	if err != nil {
		return Answer{}, s.fail(fmt.Errorf("chunkpush: encode push: %w", err))
	}
	var ans Answer
	err = s.send(ctx, http.MethodPost, s.pushURL, body, s.cfg.RequestTimeout, &ans)
	var apiErr *APIError
	if errors.As(err, &apiErr) && apiErr.Status == http.StatusConflict && apiErr.ExpectedIndex >= 0 && !open {
		// A gap: the server lost chunks it had acknowledged. They are
		// pending again, and the sender batches them anew, within the
		// batch limits and with the end only after the last of them.
		if err := s.rewind(apiErr.ExpectedIndex); err != nil {
			return Answer{}, s.fail(err)
		}
		return Answer{}, errRewound
	}
	if err != nil {
		if ctx.Err() != nil {
			return Answer{}, err
		}
		return Answer{}, s.fail(err)
	}
	if ans.Epoch > s.cfg.Epoch {
		return ans, s.fail(ErrFenced)
	}
	// An end with an error object makes the server write one chunk
	// of its own, the error event, after the batch.
	var serverChunks int64
	if end != nil && end.Error != nil && terminal(ans.Status) {
		serverChunks = 1
	}
	return ans, s.acknowledge(ans, open, serverChunks)
}

// acknowledge moves the chunks below the answer's next_index from pending
// to retained; serverChunks more may follow the pending ones, written by
// the server itself.
func (s *Stream) acknowledge(ans Answer, open bool, serverChunks int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.last = ans
	s.deliverLocked(ans.Cancel)
	if open {
		s.acked = ans.NextIndex
		return nil
	}
	n := ans.NextIndex - s.acked
	if n < 0 || n > int64(len(s.pending))+serverChunks {
		return s.failLocked(fmt.Errorf("chunkpush: the server's next_index %d is outside the %d chunks from %d this stream sent", ans.NextIndex, len(s.pending), s.acked))
	}
	n = min(n, int64(len(s.pending)))
	if s.cfg.RetainAcked > 0 {
		s.retained = append(s.retained, s.pending[:n]...)
		if over := len(s.retained) - s.cfg.RetainAcked; over > 0 {
			s.retained = append(s.retained[:0:0], s.retained[over:]...)
		}
	}
	s.pending = s.pending[n:]
	s.acked = ans.NextIndex
	s.signalLocked()
	return nil
}

// errRewound is sendBatch's answer to a gap it rewound: the request is
// to be made anew from the pending chunks (see rewind).
var errRewound = errors.New("chunkpush: rewound to the server's expected index")

// rewind makes the retained chunks from index expected pending again.
func (s *Stream) rewind(expected int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	back := s.acked - expected
	if back < 0 || back > int64(len(s.retained)) {
		return fmt.Errorf("%w (expected index %d, kept from %d)", ErrGap, expected, s.acked-int64(len(s.retained)))
	}
	k := int64(len(s.retained)) - back
	again := s.retained[k:]
	s.pending = append(append([]chunk(nil), again...), s.pending...)
	s.retained = s.retained[:k]
	s.acked = expected
	s.log.Warn("chunkpush: the server lost acknowledged chunks; sending them again", "run_id", s.cfg.RunID, "from", expected)
	return nil
}

// deliverLocked hands a new cancel request to Cancels.
func (s *Stream) deliverLocked(c *Cancel) {
	if c == nil || (c.Action == s.lastCancel.Action && c.RequestedAt.Equal(s.lastCancel.RequestedAt)) {
		return
	}
	s.lastCancel = *c
	select {
	case <-s.cancels: // replace one not yet received
	default:
	}
	s.cancels <- *c
}

func (s *Stream) fail(err error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.failLocked(err)
}

func (s *Stream) failLocked(err error) error {
	if s.err == nil {
		s.err = err
		s.signalLocked()
	}
	return s.err
}

// poll is the control long-poll: it delivers cancel requests and notices
// a takeover or the run's end between pushes.
func (s *Stream) poll() {
	defer close(s.ctrlDone)
	ctx, cancel := s.withStop(context.Background())
	defer cancel()
	go func() {
		select {
		case <-s.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	base := s.ctrlURL + "?wait=" + url.QueryEscape(s.cfg.ControlWait.String())
	var seen *Cancel // the cancel request delivered, which is no news after
	for ctx.Err() == nil {
		u := base
		if seen != nil {
			u += "&cancel_seen=" + url.QueryEscape(seen.RequestedAt.Format(time.RFC3339Nano))
		}
		started := time.Now()
		var ans Answer
		if err := s.send(ctx, http.MethodGet, u, nil, s.cfg.RequestTimeout+s.cfg.ControlWait, &ans); err != nil {
			if ctx.Err() == nil {
				s.log.Warn("chunkpush: control poll failed", "run_id", s.cfg.RunID, "error", err)
				backoff.Sleep(ctx, s.cfg.MaxBackoff)
			}
			continue
		}
		s.mu.Lock()
		s.deliverLocked(ans.Cancel)
		s.mu.Unlock()
		if ans.Epoch > s.cfg.Epoch {
			s.fail(ErrFenced)
			return
		}
		if terminal(ans.Status) {
			return
		}
		if ans.Cancel != nil {
			if seen != nil && seen.RequestedAt.Equal(ans.Cancel.RequestedAt) && time.Since(started) < s.cfg.ControlWait/2 {
				// A server that does not know cancel_seen answers a pending
				// cancel at once: poll at the heartbeat's pace, not in a loop.
				backoff.Sleep(ctx, s.cfg.Heartbeat)
			}
			c := *ans.Cancel
			seen = &c
		}
	}
}

func terminal(status string) bool {
	switch status {
	case StatusSuccess, StatusError, StatusTimeout, StatusInterrupted:
		return true
	}
	return false
}

func retryable(status int) bool {
	switch status {
	case http.StatusRequestTimeout, http.StatusTooEarly, http.StatusTooManyRequests:
		return true
	}
	return status >= 500
}

// send makes a request, retrying network errors and retryable answers
// with backoff until ctx ends, and decodes a 200 answer into into. A 409
// naming a stale epoch is ErrFenced; other final answers are *APIError.
func (s *Stream) send(ctx context.Context, method, u string, body []byte, timeout time.Duration, into any) error {
	for attempt := 0; ; attempt++ {
		retryAfter, err := s.attempt(ctx, method, u, body, timeout, into)
		if err == nil {
			return nil
		}
		var apiErr *APIError
		if errors.As(err, &apiErr) || errors.Is(err, ErrFenced) || ctx.Err() != nil {
			return err
		}
		wait := backoff.Policy{Min: s.cfg.MinBackoff, Max: s.cfg.MaxBackoff}.Delay(attempt, retryAfter)
		s.log.Debug("chunkpush: retrying", "run_id", s.cfg.RunID, "attempt", attempt+1, "wait", wait, "error", err)
		if !backoff.Sleep(ctx, wait) {
			return fmt.Errorf("chunkpush: %w (last: %v)", ctx.Err(), err)
		}
	}
}

// attempt makes one request. A retryable failure is returned as a plain
// error with the Retry-After wait, a final one as *APIError or ErrFenced.
func (s *Stream) attempt(ctx context.Context, method, u string, body []byte, timeout time.Duration, into any) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return 0, &APIError{Status: 0, Message: err.Error(), ExpectedIndex: -1}
	}
	for k, vs := range s.cfg.Header {
		req.Header[k] = vs
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := s.cfg.Client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return 0, fmt.Errorf("chunkpush: read answer: %w", err)
	}
	if resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(data, into); err != nil {
			return 0, fmt.Errorf("chunkpush: decode answer: %w", err)
		}
		return 0, nil
	}
	if retryable(resp.StatusCode) {
		return backoff.RetryAfter(resp.Header), fmt.Errorf("chunkpush: HTTP %d", resp.StatusCode)
	}
	apiErr, currentEpoch := decodeError(resp.StatusCode, data)
	if apiErr.Status == http.StatusConflict && apiErr.ExpectedIndex < 0 &&
		(currentEpoch > s.cfg.Epoch || strings.Contains(strings.ToLower(apiErr.Message), "stale epoch")) {
		return 0, fmt.Errorf("%w: %s", ErrFenced, apiErr.Message)
	}
	return 0, apiErr
}

// decodeError reads the unified error body ({code, message, details}),
// expected_index and current_epoch at its top level or in its details.
func decodeError(status int, data []byte) (*APIError, int64) {
	var body struct {
		Code          string `json:"code"`
		Message       string `json:"message"`
		Detail        string `json:"detail"`
		ExpectedIndex *int64 `json:"expected_index"`
		CurrentEpoch  int64  `json:"current_epoch"`
		Details       struct {
			ExpectedIndex *int64 `json:"expected_index"`
			CurrentEpoch  int64  `json:"current_epoch"`
		} `json:"details"`
	}
	e := &APIError{Status: status, ExpectedIndex: -1}
	if json.Unmarshal(data, &body) != nil {
		e.Message = strings.TrimSpace(string(data[:min(len(data), 200)]))
		return e, 0
	}
	e.Code, e.Message = body.Code, body.Message
	if e.Message == "" {
		e.Message = body.Detail
	}
	switch {
	case body.ExpectedIndex != nil:
		e.ExpectedIndex = *body.ExpectedIndex
	case body.Details.ExpectedIndex != nil:
		e.ExpectedIndex = *body.Details.ExpectedIndex
	}
	return e, max(body.CurrentEpoch, body.Details.CurrentEpoch)
}
