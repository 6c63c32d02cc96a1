package httpapi

import (
	"context"
	"log/slog"
	"net/http"
	"slices"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/eventlog"
	"github.com/runstream/runstream/live"
	"github.com/runstream/runstream/runevents"
)

// streamThread is GET /api/threads/{thread_id}/stream: the caller's rows
// of the thread over SSE, optionally of one run (?run_id=) and one
// category (?category=, a catalogued category). Frames are id: thread
// seq, event: event type, data: the record. The cursor, heartbeat,
// write deadline, slow-consumer cut and lifetime follow the workflow
// stream (Last-Event-ID beats ?after= beats 0); a bad cursor answers
// VALIDATION_FAILED. A thread has no terminal event, so the stream ends
// only at its maximum lifetime or when the client leaves. A thread that
// does not exist for the caller answers NOT_FOUND before any byte.
func (s *Server) streamThread(w http.ResponseWriter, r *http.Request) error {
	reader, err := s.threadReader()
	if err != nil {
		return err
	}
	if s.cfg.Hub == nil {
		return unavailable("live hub")
	}
	threadID, err := pathID(r, "thread_id")
	if err != nil {
		return err
	}
	view := eventlog.ThreadStream{ThreadID: threadID, UserID: userOf(r)}
	q := r.URL.Query()
	runID, ok, err := queryValue(q, "run_id")
	if err != nil {
		return err
	}
	if ok {
		if runevents.ValidateID("run_id", runID) != nil {
			return badParam("run_id", "must match ^[A-Za-z0-9_-]{1,64}$")
		}
		view.RunID = runID
	}
	category, ok, err := queryValue(q, "category")
	if err != nil {
		return err
	}
	if ok {
		if !slices.Contains(runevents.Categories(), runevents.Category(category)) {
			return badParam("category", "must be one of the contract's categories")
		}
		view.Category = runevents.Category(category)
	}
	cursor, err := parseCursor(r)
	if err != nil {
		e := runstream.AsError(err)
		return &runstream.Error{Code: runstream.CodeValidationFailed, Message: e.Message, Details: e.Details}
	}
	if err := s.requireThread(r, threadID); err != nil {
		return err
	}
	// A caller's view of a thread skips other users' rows: its seqs have
	// gaps.
	subscribe := func() *live.Subscription { return s.cfg.Hub.SubscribeView(view.Key(), cursor) }
	return s.serveStream(w, r, subscribe, &threadSource{reader: reader, view: view}, cursor, slog.String("thread_id", threadID))
}

// threadSource reads a thread view's rows for a follower. Its seqs have
// gaps (other users', runs' or categories' rows); a live frame after a gap
// makes the follower read the store, which finds it.
type threadSource struct {
	reader runevents.ThreadReader
	view   eventlog.ThreadStream
}

func (src *threadSource) readAfter(ctx context.Context, buf []byte, after int64, limit int) ([]byte, int, int64, bool, error) {
	recs, err := eventlog.ReadThreadStream(ctx, src.reader, src.view, after, limit)
	if err != nil || len(recs) == 0 {
		return buf, 0, after, false, err
	}
	for _, rec := range recs {
		if buf, err = eventlog.AppendThreadFrame(buf, rec); err != nil {
			return buf, 0, after, false, err
		}
	}
	return buf, len(recs), recs[len(recs)-1].Seq, false, nil
}

// end never ends a thread stream: threads have no terminal event.
func (src *threadSource) end(context.Context, int64) ([]byte, bool, bool, error) {
	return nil, false, false, nil
}
