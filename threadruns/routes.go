package threadruns

import (
	"net/http"
	"net/url"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/runevents"
	"github.com/runstream/runstream/threadsvc"
)

// Kit is what the handlers take from the server that mounts them, so that
// they read, check and answer requests exactly as its other endpoints do.
type Kit struct {
	// User returns the user a request acts for.
	User func(r *http.Request) string
	// ReadJSON reads and checks a JSON request body.
	ReadJSON func(r *http.Request) ([]byte, error)
	// Decode decodes a JSON object into v, refusing unknown members, and
	// returns VALIDATION_FAILED naming the member at fault.
	Decode func(raw []byte, v any) error
	// WriteJSON answers with v as JSON.
	WriteJSON func(w http.ResponseWriter, status int, v any)
	// QueryInt returns an integer query parameter within [min, max], 0
	// when absent, or VALIDATION_FAILED naming it.
	QueryInt func(q url.Values, name string, min, max int64) (int64, error)
}

// Handler is an HTTP handler that returns its error for the server to
// answer.
type Handler func(w http.ResponseWriter, r *http.Request) error

// Route is one endpoint: a net/http pattern and its handler.
type Route struct {
	Pattern string
	Handler Handler
}

// handlers holds what every handler uses.
type handlers struct {
	threads *threadsvc.Service
	Kit
}

// Routes returns the endpoints of the package, answered with threads.
func Routes(threads *threadsvc.Service, kit Kit) []Route {
	h := handlers{threads: threads, Kit: kit}
	return []Route{
		{"PUT /api/threads/{thread_id}/runs/{run_id}", h.putRun},
		{"GET /api/threads/{thread_id}/runs/{run_id}", h.getRun},
		{"GET /api/threads/{thread_id}/runs", h.listRuns},

		{"PUT /api/threads/{thread_id}/runs/{run_id}/feedback", h.putFeedback},
		{"POST /api/threads/{thread_id}/runs/{run_id}/feedback", h.createFeedback},
		{"GET /api/threads/{thread_id}/runs/{run_id}/feedback", h.listFeedback},
		{"GET /api/threads/{thread_id}/runs/{run_id}/feedback/stats", h.feedbackStats},
		{"DELETE /api/threads/{thread_id}/runs/{run_id}/feedback", h.deleteRunFeedback},
		{"DELETE /api/threads/{thread_id}/runs/{run_id}/feedback/{feedback_id}", h.deleteFeedback},
		{"GET /api/runs/{run_id}/feedback", h.runFeedback},

		{"POST /api/threads/{thread_id}/runs/{run_id}/cancel", h.cancelRun},
		{"GET /api/threads/{thread_id}/runs/{run_id}/join", h.joinRun},
		{"GET /api/threads/{thread_id}/runs/{run_id}/stream", h.streamRun},
		{"POST /api/threads/{thread_id}/runs/{run_id}/stream", h.streamRun},
	}
}

// PathID returns a path parameter that must be a thread, run or feedback
// id: VALIDATION_FAILED with details.parameter otherwise.
func PathID(r *http.Request, name string) (string, error) {
	id := r.PathValue(name)
	if runevents.ValidateID(name, id) != nil {
		return "", runstream.Errorf(runstream.CodeValidationFailed, "%s must match ^[A-Za-z0-9_-]{1,64}$", name).
			WithDetail("parameter", name)
	}
	return id, nil
}

// ThreadAndRun returns the thread_id and run_id path parameters.
func ThreadAndRun(r *http.Request) (string, string, error) {
	thread, err := PathID(r, "thread_id")
	if err != nil {
		return "", "", err
	}
	run, err := PathID(r, "run_id")
	return thread, run, err
}
