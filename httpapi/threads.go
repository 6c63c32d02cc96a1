package httpapi

import (
	"net/http"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/runevents"
)

// The thread API: ingest of run events, run rows and feedback, the
// consumers of reference §2 and the live follow of a thread, each
// answered by the thread service (threadsvc), which says who sees what.
// Path, query and header parameters that break their rules answer
// VALIDATION_FAILED (422), as the original FastAPI service does. A server
// without the thread service answers UNAVAILABLE on every thread
// endpoint.
func (s *Server) threadRoutes() {
	s.handleThreads("POST /api/threads/{thread_id}/runs/{run_id}/events", s.limitAppends(s.appendThreadEvents))
	s.handleThreads("GET /api/threads/{thread_id}/runs/{run_id}/events", s.listThreadRunEvents)
	s.handleThreads("DELETE /api/threads/{thread_id}/runs/{run_id}/events", s.deleteThreadRunEvents)
	s.handleThreads("DELETE /api/threads/{thread_id}/events", s.deleteThreadEvents)

	s.handleThreads("PUT /api/threads/{thread_id}/runs/{run_id}", s.putThreadRun)
	s.handleThreads("GET /api/threads/{thread_id}/runs/{run_id}", s.getThreadRun)
	s.handleThreads("GET /api/threads/{thread_id}/runs", s.listThreadRuns)
	s.handleThreads("PUT /api/threads/{thread_id}/runs/{run_id}/feedback", s.putThreadRunFeedback)
	s.handleThreads("DELETE /api/threads/{thread_id}/runs/{run_id}/feedback", s.deleteThreadRunFeedback)
	s.handleThreads("GET /api/runs/{run_id}/feedback", s.listRunFeedback)

	s.handleThreads("GET /api/threads/{thread_id}/messages", s.listThreadMessages)
	s.handleThreads("GET /api/threads/{thread_id}/messages/page", s.pageThreadMessages)
	s.handleThreads("GET /api/threads/{thread_id}/runs/{run_id}/messages", s.listThreadRunMessages)
	s.handleThreads("GET /api/runs/{run_id}/messages", s.listRunMessages)
	s.handleThreads("GET /api/threads/{thread_id}/runs/{run_id}/workspace-changes", s.getWorkspaceChanges)
	s.handleThreads("GET /api/threads/{thread_id}/token-usage", s.getThreadTokenUsage)

	s.handleThreads("GET /api/threads/{thread_id}/stream", s.streamThread)
}

// handleThreads registers a thread endpoint: h, or UNAVAILABLE on a
// server without the thread service.
func (s *Server) handleThreads(pattern string, h handlerFunc) {
	if s.threads == nil {
		h = func(http.ResponseWriter, *http.Request) error {
			return runstream.Errorf(runstream.CodeUnavailable, "the thread API is not enabled on this server")
		}
	}
	s.handleAPI(pattern, h)
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
