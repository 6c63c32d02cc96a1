package httpapi

import (
	"net/http"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/threadruns"
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

	s.handleThreads("POST /api/threads/{thread_id}/events", s.limitAppends(s.appendThreadBatch))

	// Run rows, feedback and the routes of executing runs (package
	// threadruns).
	for _, route := range threadruns.Routes(s.threads, ThreadKit()) {
		s.handleThreads(route.Pattern, handlerFunc(route.Handler))
	}

	s.handleThreads("GET /api/threads/{thread_id}/messages", s.listThreadMessages)
	s.handleThreads("GET /api/threads/{thread_id}/messages/page", s.pageThreadMessages)
	s.handleThreads("GET /api/threads/{thread_id}/runs/{run_id}/messages", s.listThreadRunMessages)
	s.handleThreads("GET /api/runs/{run_id}/messages", s.listRunMessages)
	s.handleThreads("GET /api/threads/{thread_id}/runs/{run_id}/workspace-changes", s.getWorkspaceChanges)
	s.handleThreads("GET /api/threads/{thread_id}/token-usage", s.getThreadTokenUsage)

	s.handleThreads("GET /api/threads/{thread_id}/stream", s.streamThread)
}

// ThreadKit returns what handlers mounted beside the thread API (package
// threadruns, package langgraph) read and answer requests with, so that
// they check bodies and write answers as the API's own endpoints do.
func ThreadKit() threadruns.Kit {
	return threadruns.Kit{User: userOf, ReadJSON: readJSONBody, Decode: decodeBody, WriteJSON: writeJSON, QueryInt: queryIntOrZero}
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

// pathID and threadAndRun read the id path parameters as the run and
// feedback routes do.
var (
	pathID       = threadruns.PathID
	threadAndRun = threadruns.ThreadAndRun
)

// decodeBody decodes a JSON object into v as decodeStrict does, its error
// VALIDATION_FAILED naming the member at fault.
func decodeBody(raw []byte, v any) error {
	if err := decodeStrict(raw, v); err != nil {
		return bodyProblem("", err)
	}
	return nil
}
