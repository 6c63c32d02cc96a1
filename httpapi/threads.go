package httpapi

import (
	"context"
	"net/http"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/eventlog"
	"github.com/runstream/runstream/runevents"
)

// The thread API: ingest of run events, run rows and feedback, the
// consumers of reference §2 and the live follow of a thread.
//
// Every thread endpoint acts for the caller: a thread exists for a user
// when it holds rows or run rows of theirs, and one that does not answers
// NOT_FOUND, whether it is unknown or another user's. Writes to a thread
// that holds only other users' rows answer NOT_FOUND too (the check is not
// atomic with the write: two users creating one thread id at the same
// instant may both succeed, and each still reads only their own rows).
// Path, query and header parameters that break their rules answer
// VALIDATION_FAILED (422), as the original FastAPI service does. A missing
// dependency (store, run store, event log, idempotency store, hub)
// answers UNAVAILABLE.
func (s *Server) threadRoutes() {
	s.handleAPI("POST /api/threads/{thread_id}/runs/{run_id}/events", s.appendThreadEvents)
	s.handleAPI("GET /api/threads/{thread_id}/runs/{run_id}/events", s.listThreadRunEvents)
	s.handleAPI("DELETE /api/threads/{thread_id}/runs/{run_id}/events", s.deleteThreadRunEvents)
	s.handleAPI("DELETE /api/threads/{thread_id}/events", s.deleteThreadEvents)

	s.handleAPI("PUT /api/threads/{thread_id}/runs/{run_id}", s.putThreadRun)
	s.handleAPI("GET /api/threads/{thread_id}/runs/{run_id}", s.getThreadRun)
	s.handleAPI("GET /api/threads/{thread_id}/runs", s.listThreadRuns)
	s.handleAPI("PUT /api/threads/{thread_id}/runs/{run_id}/feedback", s.putThreadRunFeedback)
	s.handleAPI("GET /api/runs/{run_id}/feedback", s.listRunFeedback)

	s.handleAPI("GET /api/threads/{thread_id}/messages", s.listThreadMessages)
	s.handleAPI("GET /api/threads/{thread_id}/messages/page", s.pageThreadMessages)
	s.handleAPI("GET /api/threads/{thread_id}/runs/{run_id}/messages", s.listThreadRunMessages)
	s.handleAPI("GET /api/runs/{run_id}/messages", s.listRunMessages)
	s.handleAPI("GET /api/threads/{thread_id}/runs/{run_id}/workspace-changes", s.getWorkspaceChanges)
	s.handleAPI("GET /api/threads/{thread_id}/token-usage", s.getThreadTokenUsage)

	s.handleAPI("GET /api/threads/{thread_id}/stream", s.streamThread)
}

func unavailable(what string) error {
	return runstream.Errorf(runstream.CodeUnavailable, "%s not available", what)
}

// runEvents returns the run-event store, or UNAVAILABLE.
func (s *Server) runEvents() (runevents.Store, error) {
	if s.cfg.RunEvents == nil {
		return nil, unavailable("run event store")
	}
	return s.cfg.RunEvents, nil
}

// threadRuns returns the run store, or UNAVAILABLE.
func (s *Server) threadRuns() (runevents.RunStore, error) {
	if s.cfg.Runs == nil {
		return nil, unavailable("run store")
	}
	return s.cfg.Runs, nil
}

// threadReader returns Config.Threads, else the run-event store when it
// reads threads, or UNAVAILABLE.
func (s *Server) threadReader() (runevents.ThreadReader, error) {
	if s.cfg.Threads != nil {
		return s.cfg.Threads, nil
	}
	if r, ok := s.cfg.RunEvents.(runevents.ThreadReader); ok {
		return r, nil
	}
	return nil, unavailable("thread reader")
}

// threadLog returns the thread event log, or UNAVAILABLE.
func (s *Server) threadLog() (*eventlog.ThreadLog, error) {
	if s.cfg.ThreadLog == nil {
		return nil, unavailable("thread event log")
	}
	return s.cfg.ThreadLog, nil
}

// pathID returns a path parameter that must be a thread or run id.
func pathID(r *http.Request, name string) (string, error) {
	id := r.PathValue(name)
	if runevents.ValidateID(name, id) != nil {
		return "", runstream.Errorf(runstream.CodeValidationFailed, "%s must match ^[A-Za-z0-9_-]{1,64}$", name).
			WithDetail("parameter", name)
	}
	return id, nil
}

// threadAndRun returns the thread_id and run_id path parameters.
func threadAndRun(r *http.Request) (string, string, error) {
	thread, err := pathID(r, "thread_id")
	if err != nil {
		return "", "", err
	}
	run, err := pathID(r, "run_id")
	return thread, run, err
}

func threadNotFound(threadID string) error {
	return runstream.Errorf(runstream.CodeNotFound, "thread %s not found", threadID)
}

// threadExists reports whether the thread holds rows or run rows visible
// to owner.
func (s *Server) threadExists(ctx context.Context, threadID string, owner runevents.Owner) (bool, error) {
	reader, err := s.threadReader()
	if err != nil {
		return false, err
	}
	runs, err := s.threadRuns()
	if err != nil {
		return false, err
	}
	rows, err := reader.ListThreadEvents(ctx, runevents.ListThreadEventsParams{ThreadID: threadID, Owner: owner, Limit: 1})
	if err != nil || len(rows) > 0 {
		return len(rows) > 0, err
	}
	rs, err := runs.ListRuns(ctx, threadID, owner)
	return len(rs) > 0, err
}

// requireThread answers NOT_FOUND unless the thread exists for the caller.
func (s *Server) requireThread(r *http.Request, threadID string) error {
	ok, err := s.threadExists(r.Context(), threadID, ownerOf(r))
	if err != nil {
		return err
	}
	if !ok {
		return threadNotFound(threadID)
	}
	return nil
}

// requireWritableThread answers NOT_FOUND when the thread exists only for
// other users, so that nobody writes into, or learns of, another user's
// thread. A thread that does not exist yet is writable: the write creates
// it. It asks "does anyone have rows" before "does the caller": rows only
// appear, so a concurrent first write of the caller's own cannot make the
// thread look foreign, as the other order would.
func (s *Server) requireWritableThread(r *http.Request, threadID string) error {
	anyone, err := s.threadExists(r.Context(), threadID, runstream.AnyOwner)
	if err != nil || !anyone {
		return err
	}
	mine, err := s.threadExists(r.Context(), threadID, ownerOf(r))
	if err != nil {
		return err
	}
	if !mine {
		return threadNotFound(threadID)
	}
	return nil
}
