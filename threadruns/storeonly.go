package threadruns

import (
	"net/http"

	"github.com/runstream/runstream"
)

// The routes of an executing run. runstream stores runs; it executes
// none of DeerFlow's, so every run is, in DeerFlow's words, "not active on
// this worker": the routes answer CONFLICT (409) with DeerFlow's message
// for a run the caller has, NOT_FOUND ("Run <id> not found") otherwise
// (threadsvc.Service.StoreOnlyRun). The action query parameter, when
// given, must be interrupt or rollback, as DeerFlow's; wait, when given,
// 0 or 1 (nothing waits: nothing runs here).

// cancelRun is POST /api/threads/{thread_id}/runs/{run_id}/cancel
// (?wait=false&action=interrupt).
func (h handlers) cancelRun(w http.ResponseWriter, r *http.Request) error {
	threadID, runID, err := ThreadAndRun(r)
	if err != nil {
		return err
	}
	if _, err := QueryAction(r); err != nil {
		return err
	}
	if _, err := QueryWait(r); err != nil {
		return err
	}
	return h.threads.StoreOnlyRun(r.Context(), h.User(r), threadID, runID, "cancel")
}

// joinRun is GET /api/threads/{thread_id}/runs/{run_id}/join.
func (h handlers) joinRun(w http.ResponseWriter, r *http.Request) error {
	threadID, runID, err := ThreadAndRun(r)
	if err != nil {
		return err
	}
	return h.threads.StoreOnlyRun(r.Context(), h.User(r), threadID, runID, "stream")
}

// streamRun is GET and POST /api/threads/{thread_id}/runs/{run_id}/stream
// (?action=interrupt|rollback&wait=0): a POST with an action is a cancel
// (DeerFlow's stop button), anything else a join. A GET never cancels, as
// on the LangGraph route: it is safe to repeat or prefetch (DeerFlow's
// code cancels on either method, its documentation on POST only).
func (h handlers) streamRun(w http.ResponseWriter, r *http.Request) error {
	threadID, runID, err := ThreadAndRun(r)
	if err != nil {
		return err
	}
	action, err := QueryAction(r)
	if err != nil {
		return err
	}
	if _, err := QueryWait(r); err != nil {
		return err
	}
	what := "stream"
	if action != "" && r.Method == http.MethodPost {
		what = "cancel"
	}
	return h.threads.StoreOnlyRun(r.Context(), h.User(r), threadID, runID, what)
}

// QueryAction returns the action query parameter of a cancel ("" when
// absent): one of interrupt and rollback, given once.
func QueryAction(r *http.Request) (string, error) {
	values, ok := r.URL.Query()["action"]
	if !ok {
		return "", nil
	}
	if len(values) != 1 || (values[0] != "interrupt" && values[0] != "rollback") {
		return "", runstream.Errorf(runstream.CodeValidationFailed, "action: must be interrupt or rollback").WithDetail("parameter", "action")
	}
	return values[0], nil
}

// QueryWait returns the wait query parameter of a cancel (false when
// absent): 0, 1, false or true, given once, as DeerFlow's integer
// parameter and the LangGraph SDK's boolean send it.
func QueryWait(r *http.Request) (bool, error) {
	values, ok := r.URL.Query()["wait"]
	if !ok {
		return false, nil
	}
	if len(values) == 1 {
		switch values[0] {
		case "0", "false":
			return false, nil
		case "1", "true":
			return true, nil
		}
	}
	return false, runstream.Errorf(runstream.CodeValidationFailed, "wait: must be 0 or 1").WithDetail("parameter", "wait")
}
