// Package runchunks is the domain of a run's stream chunks: the chunks a
// producer running elsewhere pushes for a LangGraph-compatible run stream,
// the run they belong to (epoch, next index, status, lease, cancel
// request), the rules a push obeys (Plan) and the Store every backend
// implements.
//
// A chunk is one frame of the run's stream, as the LangGraph SDK reads it:
// an event name ("values", "messages", "updates", "custom", "error",
// "mode|namespace" of a subgraph, …) and its JSON data. Indexes are
// assigned by the producer: 0, 1, 2, … without gaps, so that a retried
// push is recognised (a duplicate is ignored) and a lost one is refused
// (a gap). The epoch fences a producer that was replaced: a push of an
// older epoch is refused, a newer epoch takes the run over.
package runchunks

import (
	"context"
	"encoding/json"
	"time"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/runevents"
)

// Chunk is one stored frame of a run's stream.
type Chunk struct {
	Index int64
	// Event is the SSE event name; never "metadata", "end" or "gap",
	// which the join stream writes itself.
	Event string
	// Data is compact JSON on one line.
	Data      json.RawMessage
	CreatedAt time.Time
}

// Cancel is a pending cancel request of a run.
type Cancel struct {
	// Action is "interrupt" or "rollback".
	Action      string
	RequestedAt time.Time
}

// Run is the stream state of one run.
type Run struct {
	RunID    string
	ThreadID string
	OwnerID  string
	// Epoch is the newest producer epoch seen.
	Epoch int64
	// NextIndex is the index the next new chunk takes: the count of chunks
	// ever written.
	NextIndex int64
	// FirstIndex is the lowest index still kept; FirstIndex == NextIndex
	// when no chunk is kept.
	FirstIndex int64
	// Status is "running" until the end, then the terminal status.
	Status runevents.RunStatus
	// LeaseExpiresAt is when the sweeper may end the run unless a push
	// renews it; zero once the run ended.
	LeaseExpiresAt time.Time
	// Cancel is the pending cancel request; nil when none.
	Cancel    *Cancel
	CreatedAt time.Time
	UpdatedAt time.Time
	// EndedAt is when the run ended; zero while it is active.
	EndedAt time.Time
}

// Ended reports whether the run has ended.
func (r Run) Ended() bool { return !r.EndedAt.IsZero() }

// End ends a run.
type End struct {
	// Status is the terminal status: success, error, timeout or
	// interrupted.
	Status runevents.RunStatus
	// Error, when set, is a JSON object {"message","name"} written as the
	// run's last chunk, event "error", before the end.
	Error json.RawMessage
}

// Push is one producer write: chunks first_index, first_index+1, … and
// optionally the end, under an epoch.
type Push struct {
	RunID    string
	ThreadID string
	OwnerID  string
	Epoch    int64
	// FirstIndex is the index of Chunks[0] (Chunk.Index is ignored).
	FirstIndex int64
	Chunks     []Chunk
	End        *End
	// Now stamps the chunks and the run; the lease runs until Now+Lease.
	Now   time.Time
	Lease time.Duration
	// MaxChunks is how many chunks a run keeps: past it the oldest are
	// deleted in the same transaction. <= 0: no cap.
	MaxChunks int64
	// Expire makes it the lease sweeper's write: it applies only when the
	// run is active and its lease expired at Now, at the run's next index
	// and the epoch after the run's, which fences the producer that lost
	// its lease (Epoch and FirstIndex are ignored).
	Expire bool
}

// Result is the outcome of a push.
type Result struct {
	// Run is the run's state after the push.
	Run Run
	// Appended are the chunks the push wrote, with their indexes.
	Appended []Chunk
	// Created is set when the push created the run; Ended when it ended
	// it.
	Created, Ended bool
	// Skipped is set when an Expire push found nothing to do.
	Skipped bool
}

// Store keeps runs and their chunks. It is safe for concurrent use; every
// backend passes runchunkstest.
type Store interface {
	// Push applies p in one transaction as Plan decides it: the run's row,
	// the new chunks, the cap's deletions, and the thread run row's status
	// (created "running" with the run, terminal with the end). An error of
	// Plan writes nothing.
	Push(ctx context.Context, p Push) (Result, error)
	// GetRun returns the run, or CodeNotFound.
	GetRun(ctx context.Context, runID string) (Run, error)
	// ReadChunks returns up to limit chunks of the run with index > after,
	// ascending. With maxBytes > 0 it stops after the chunk whose data
	// brings the data read to maxBytes or more, so that a page of large
	// chunks stays bounded and holds at least one chunk.
	ReadChunks(ctx context.Context, runID string, after int64, limit, maxBytes int) ([]Chunk, error)
	// RequestCancel stores a cancel request on an active run and returns
	// the run; an ended run is returned unchanged. A request repeating the
	// pending one's action keeps its time; another action replaces both,
	// so that a producer that saw the earlier request (its time: the
	// control poll's cancel_seen) learns of the change. CodeNotFound when
	// there is no run.
	RequestCancel(ctx context.Context, runID, action string, at time.Time) (Run, error)
	// ExpiredRuns returns up to limit active runs whose lease expired at
	// now.
	ExpiredRuns(ctx context.Context, now time.Time, limit int) ([]Run, error)
	// DeleteEndedChunks deletes the chunks of runs that ended before
	// before (FirstIndex becomes NextIndex; the run is kept) and returns
	// how many it deleted.
	DeleteEndedChunks(ctx context.Context, before time.Time) (int64, error)
}

// Terminal reports whether s is a status that ends a run.
func Terminal(s runevents.RunStatus) bool {
	switch s {
	case runevents.RunSuccess, runevents.RunError, runevents.RunTimeout, runevents.RunInterrupted:
		return true
	}
	return false
}

// ErrorEvent is the event of the chunk an end with an error writes, and
// the sweeper's.
const ErrorEvent = "error"

// Plan decides p on the run's current state cur (nil: no run yet) and
// returns what the push writes; a backend applies it in the transaction
// that read cur. Its errors write nothing:
//
//   - another owner's run: CodeNotFound, as a missing run;
//   - another thread's run: CodeConflict;
//   - an epoch below the run's: CodeConflict "stale epoch", details
//     current_epoch;
//   - first_index past the next index: CodeConflict, details
//     expected_index (the next index);
//   - a takeover (an epoch above the run's) with chunks starting below
//     the next index: CodeConflict, details expected_index;
//   - an ended run: a push of the run's epoch whose chunks all are below
//     the next index and whose end, if any, has the run's status is a
//     duplicate (answered with the run); anything else CodeConflict,
//     details status.
//
// Chunks of the run's epoch below the next index are duplicates and
// skipped; the rest are appended. The lease is renewed; an end clears it.
func Plan(cur *Run, p Push) (Result, error) {
	var run Run
	res := Result{}
	if cur == nil {
		if p.Expire {
			return Result{Skipped: true}, nil
		}
		if p.FirstIndex != 0 {
			return res, gapError(0)
		}
		run = Run{RunID: p.RunID, ThreadID: p.ThreadID, OwnerID: p.OwnerID, Epoch: p.Epoch,
			Status: runevents.RunRunning, CreatedAt: p.Now}
		res.Created = true
	} else {
		run = *cur
		if run.Cancel != nil {
			c := *run.Cancel
			run.Cancel = &c
		}
		if p.Expire {
			if run.Ended() || run.LeaseExpiresAt.After(p.Now) {
				return Result{Run: run, Skipped: true}, nil
			}
			// The sweeper takes the run over: the lost producer is fenced.
			p.Epoch, p.FirstIndex = run.Epoch+1, run.NextIndex
		}
		if run.OwnerID != p.OwnerID {
			return res, runstream.Errorf(runstream.CodeNotFound, "run %s not found", p.RunID)
		}
		if run.ThreadID != p.ThreadID {
			return res, runstream.Errorf(runstream.CodeConflict, "run %s belongs to another thread", p.RunID)
		}
		if p.Epoch < run.Epoch {
			return res, runstream.Errorf(runstream.CodeConflict, "stale epoch %d: run %s is at epoch %d (another producer took it over)", p.Epoch, p.RunID, run.Epoch).
				WithDetail("current_epoch", run.Epoch)
		}
		// A push of a greater epoch takes the run over: its chunks are
		// new, not retries of chunks stored under the older epoch, so none
		// of them may fall below the next index, where they would be
		// skipped as duplicates.
		takeover := p.Epoch > run.Epoch && len(p.Chunks) > 0
		if run.Ended() {
			dup := !takeover && p.FirstIndex+int64(len(p.Chunks)) <= run.NextIndex && (p.End == nil || p.End.Status == run.Status)
			if !dup {
				return res, runstream.Errorf(runstream.CodeConflict, "run %s has ended (status: %s)", p.RunID, run.Status).
					WithDetail("status", string(run.Status))
			}
			return Result{Run: run}, nil
		}
		if p.FirstIndex > run.NextIndex {
			return res, gapError(run.NextIndex)
		}
		if takeover && p.FirstIndex < run.NextIndex {
			return res, runstream.Errorf(runstream.CodeConflict, "a push that takes a run over with a greater epoch must start at the next index %d: the chunks below it are the earlier producer's", run.NextIndex).
				WithDetail("expected_index", run.NextIndex)
		}
		run.Epoch = p.Epoch
	}
	skip := run.NextIndex - p.FirstIndex
	for i, c := range p.Chunks {
		if int64(i) < skip {
			continue
		}
		c.Index, c.CreatedAt = run.NextIndex, p.Now
		res.Appended = append(res.Appended, c)
		run.NextIndex++
	}
	run.UpdatedAt = p.Now
	run.LeaseExpiresAt = p.Now.Add(p.Lease)
	if p.End != nil {
		if len(p.End.Error) > 0 {
			res.Appended = append(res.Appended, Chunk{Index: run.NextIndex, Event: ErrorEvent, Data: p.End.Error, CreatedAt: p.Now})
			run.NextIndex++
		}
		run.Status, run.EndedAt, run.LeaseExpiresAt = p.End.Status, p.Now, time.Time{}
		res.Ended = true
	}
	if p.MaxChunks > 0 && run.NextIndex-run.FirstIndex > p.MaxChunks {
		run.FirstIndex = run.NextIndex - p.MaxChunks
		for len(res.Appended) > 0 && res.Appended[0].Index < run.FirstIndex {
			res.Appended = res.Appended[1:] // written past the cap: not stored
		}
	}
	res.Run = run
	return res, nil
}

// gapError refuses a push that would leave a hole before expected.
func gapError(expected int64) error {
	return runstream.Errorf(runstream.CodeConflict, "chunk index gap: the next chunk must have index %d", expected).
		WithDetail("expected_index", expected)
}

// NotFound is the error of a run the store does not hold.
func NotFound(runID string) error {
	return runstream.Errorf(runstream.CodeNotFound, "run %s not found", runID)
}
