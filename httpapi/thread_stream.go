package httpapi

import (
	"log/slog"
	"net/http"
	"slices"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/runevents"
)

// streamThread is GET /api/threads/{thread_id}/stream: the caller's rows
// of the thread over SSE, optionally of one run (?run_id=) and one
// category (?category=, a catalogued category). Frames are id: thread
// seq, event: event type, data: the record. The cursor, heartbeat,
// write deadline, slow-consumer cut and lifetime follow the workflow
// stream (Last-Event-ID beats ?after= beats 0); a bad cursor answers
// VALIDATION_FAILED. A thread has no terminal event, so the stream ends
// only at its maximum lifetime or when the client leaves. A thread the
// caller has no rows of (unknown, empty or another user's) opens alike and
// waits for the caller's first write, so a chat can subscribe before it.
func (s *Server) streamThread(w http.ResponseWriter, r *http.Request) error {
	threadID, err := pathID(r, "thread_id")
	if err != nil {
		return err
	}
	q := r.URL.Query()
	runID, ok, err := queryValue(q, "run_id")
	if err != nil {
		return err
	}
	if ok && runevents.ValidateID("run_id", runID) != nil {
		return badParam("run_id", "must match ^[A-Za-z0-9_-]{1,64}$")
	}
	category, ok, err := queryValue(q, "category")
	if err != nil {
		return err
	}
	if ok && !slices.Contains(runevents.Categories(), runevents.Category(category)) {
		return badParam("category", "must be one of the contract's categories")
	}
	cursor, err := parseCursor(r)
	if err != nil {
		e := runstream.AsError(err)
		return &runstream.Error{Code: runstream.CodeValidationFailed, Message: e.Message, Details: e.Details}
	}
	st, err := s.threads.OpenStream(r.Context(), userOf(r), threadID, runID, runevents.Category(category))
	if err != nil {
		return err
	}
	return s.serveStream(w, r, st, cursor, slog.String("thread_id", threadID))
}
