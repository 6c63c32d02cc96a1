package runevents

import (
	"context"
	"strconv"
	"time"

	"github.com/runstream/runstream"
)

// ImportEvent is one row of another system's thread, to import with the
// seq it already has.
type ImportEvent struct {
	NewEvent
	// Seq is the row's seq in its thread, at least 1.
	Seq int64
}

// Importer is implemented by the run-event stores that take a thread's
// rows with the seqs they already carry (an import of DeerFlow's data,
// say), where Put and PutBatch assign seqs themselves.
type Importer interface {
	// ImportThread prepares events, rows of one thread, with
	// PrepareImport (ascending, distinct seqs; gaps allowed), stores them
	// in one transaction and returns them as stored; later appends
	// continue after the highest seq. Every seq must be above the
	// highest the thread has handed out (LastThreadSeq: 0 for a new
	// thread; deleted rows count), so that seqs stay unique and in commit
	// order: a whole thread goes into a new one, the rows a thread gained
	// since an import after them. Otherwise it fails with CodeConflict and
	// writes nothing. No events write nothing.
	ImportThread(ctx context.Context, events []ImportEvent) ([]Record, error)
}

// PrepareImport prepares the rows of one thread for Importer.ImportThread
// exactly as Prepare prepares an append (a zero CreatedAt is now), keeping
// each row's seq. The rows must belong to one thread and have seqs of at
// least 1 in strictly ascending order. It fails on the first invalid row,
// naming its index (details.index).
func PrepareImport(events []ImportEvent, now time.Time, maxTraceContent int) ([]Record, error) {
	out := make([]Record, len(events))
	for i, e := range events {
		fail := func(err error) ([]Record, error) {
			re := runstream.AsError(err)
			return nil, &runstream.Error{Code: re.Code, Message: "events[" + strconv.Itoa(i) + "]: " + re.Message, Details: map[string]any{"index": i}, Err: re.Err}
		}
		switch {
		case i > 0 && e.ThreadID != events[0].ThreadID:
			return fail(runstream.Errorf(runstream.CodeInvalidArgument, "an import belongs to one thread"))
		case e.Seq < 1:
			return fail(runstream.Errorf(runstream.CodeInvalidArgument, "seq %d: want at least 1", e.Seq))
		case i > 0 && e.Seq <= events[i-1].Seq:
			return fail(runstream.Errorf(runstream.CodeInvalidArgument, "seq %d after seq %d: seqs must ascend strictly", e.Seq, events[i-1].Seq))
		}
		rec, err := Prepare(e.NewEvent, now, maxTraceContent)
		if err != nil {
			return fail(err)
		}
		rec.Seq = e.Seq
		out[i] = rec
	}
	return out, nil
}

// ImportConflict is the error of ImportThread when the thread has handed
// out seq lastSeq already and the import starts at seq first.
func ImportConflict(threadID string, lastSeq, first int64) error {
	return runstream.Errorf(runstream.CodeConflict, "thread %s has handed out seqs up to %d: an import starting at seq %d must start above", threadID, lastSeq, first).
		WithDetail("last_seq", lastSeq)
}

// FeedbackImporter is implemented by the run stores that take another
// system's feedback with the id and times it already has.
type FeedbackImporter interface {
	// ImportFeedback stores f, prepared by PrepareImportFeedback, unless
	// its user has feedback on that run and message id already: then it
	// writes nothing and returns that feedback and created=false. An id
	// that another feedback holds is CodeConflict.
	ImportFeedback(ctx context.Context, f Feedback) (stored Feedback, created bool, err error)
}

// PrepareImportFeedback checks f as Feedback.Prepare does, and its id
// (^[A-Za-z0-9_-]{1,64}$, required); it fills CreatedAt with now when
// zero and UpdatedAt with CreatedAt when zero, both in UTC, truncated to
// microseconds.
func PrepareImportFeedback(f Feedback, now time.Time) (Feedback, error) {
	if err := ValidateID("feedback_id", f.ID); err != nil {
		return f, err
	}
	f, err := f.Prepare()
	if err != nil {
		return f, err
	}
	if f.CreatedAt.IsZero() {
		f.CreatedAt = now
	}
	if f.UpdatedAt.IsZero() {
		f.UpdatedAt = f.CreatedAt
	}
	f.CreatedAt = f.CreatedAt.UTC().Truncate(time.Microsecond)
	f.UpdatedAt = f.UpdatedAt.UTC().Truncate(time.Microsecond)
	return f, nil
}

// FeedbackIDConflict is the error of ImportFeedback when another feedback
// holds the id.
func FeedbackIDConflict(id string) error {
	return runstream.Errorf(runstream.CodeConflict, "feedback id %s belongs to another feedback", id)
}

// ImportedFeedback returns, among a run's feedback, the one of f's user
// and message id: what ImportFeedback answers when its insert did nothing.
// When there is none the insert met f's id on another feedback:
// FeedbackIDConflict.
func ImportedFeedback(runFeedback []Feedback, f Feedback) (Feedback, error) {
	for _, g := range runFeedback {
		if g.UserID == f.UserID && g.MessageID == f.MessageID {
			return g, nil
		}
	}
	return Feedback{}, FeedbackIDConflict(f.ID)
}
