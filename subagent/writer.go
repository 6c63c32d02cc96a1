package subagent

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"

	"github.com/runstream/runstream/runevents"
)

// BatchSize is the number of pending events that makes a Writer write.
const BatchSize = 25

// Appender appends a batch of events of one thread, all or nothing, in
// order (journal.Sink and the remote producer's sink are Appenders).
type Appender interface {
	Append(ctx context.Context, events []runevents.NewEvent) error
}

// Writer maps the task chunks of one run and appends their events in
// batches. It is safe for concurrent use; Add calls are serialized.
type Writer struct {
	app             Appender
	threadID, runID string
	log             *slog.Logger

	mu      sync.Mutex
	pending []runevents.NewEvent
}

// NewWriter returns the writer of the run (threadID, runID). A nil logger
// means slog.Default().
func NewWriter(app Appender, threadID, runID string, log *slog.Logger) *Writer {
	if log == nil {
		log = slog.Default()
	}
	return &Writer{app: app, threadID: threadID, runID: runID, log: log}
}

// Add maps chunk and queues its event; it writes the queue when BatchSize
// events are pending or the event is subagent.end. It returns only the
// chunk's error (wrapping ErrMalformed): a failed write is logged and its
// batch stays queued, at the front, for the next write.
func (w *Writer) Add(ctx context.Context, chunk json.RawMessage) error {
	e, ok, err := Map(w.threadID, w.runID, chunk)
	if err != nil || !ok {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.pending = append(w.pending, e)
	if e.EventType == runevents.EventSubagentEnd || len(w.pending) >= BatchSize {
		if err := w.writeLocked(ctx); err != nil {
			w.log.Warn("subagent: write failed; events kept for the next write", "events", len(w.pending), "err", err)
		}
	}
	return nil
}

// Flush writes every pending event in one batch and returns the write's
// error; the batch then stays queued.
func (w *Writer) Flush(ctx context.Context) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.writeLocked(ctx); err != nil {
		return fmt.Errorf("subagent flush: %w", err)
	}
	return nil
}

// Pending returns the number of events not yet written.
func (w *Writer) Pending() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.pending)
}

func (w *Writer) writeLocked(ctx context.Context) error {
	if len(w.pending) == 0 {
		return nil
	}
	if err := w.app.Append(ctx, w.pending); err != nil {
		return err
	}
	w.pending = nil
	return nil
}
