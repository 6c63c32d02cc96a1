package httpapi

import (
	"net/http"
	"net/url"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/threadsvc"
)

// listThreadMessages is the legacy feed GET
// /api/threads/{thread_id}/messages (reference §2.1): limit 1…200
// (default 50), before_seq, after_seq → threadsvc.Service.Messages as a
// bare array.
func (s *Server) listThreadMessages(w http.ResponseWriter, r *http.Request) error {
	threadID, err := pathID(r, "thread_id")
	if err != nil {
		return err
	}
	c, err := parseHistoryCursors(r)
	if err != nil {
		return err
	}
	rows, err := s.threads.Messages(r.Context(), userOf(r), threadID, c)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, rows)
	return nil
}

// pageThreadMessages is GET /api/threads/{thread_id}/messages/page
// (reference §2.2), the thread history of the frontend: backward only
// (after_seq in any form is refused), limit 1…200 (default 50),
// before_seq → threadsvc.Service.MessagePage.
func (s *Server) pageThreadMessages(w http.ResponseWriter, r *http.Request) error {
	threadID, err := pathID(r, "thread_id")
	if err != nil {
		return err
	}
	q := r.URL.Query()
	c, errs := readBackwardCursors(q)
	if err := queryProblems(errs...); err != nil {
		return err
	}
	if _, ok := q["after_seq"]; ok {
		// DeerFlow's own check in its handler, after the declared
		// parameters were validated, answered with a string detail.
		return runstream.Errorf(runstream.CodeValidationFailed, "after_seq is not supported by this backward-only endpoint")
	}
	page, err := s.threads.MessagePage(r.Context(), userOf(r), threadID, c)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, page)
	return nil
}

// listThreadRunMessages is GET
// /api/threads/{thread_id}/runs/{run_id}/messages (reference §2.3): limit
// 1…200 (default 50), before_seq, after_seq →
// threadsvc.Service.RunMessages as {data, has_more}.
func (s *Server) listThreadRunMessages(w http.ResponseWriter, r *http.Request) error {
	threadID, runID, err := threadAndRun(r)
	if err != nil {
		return err
	}
	c, err := parseHistoryCursors(r)
	if err != nil {
		return err
	}
	page, err := s.threads.RunMessages(r.Context(), userOf(r), threadID, runID, c)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, page)
	return nil
}

// listRunMessages is GET /api/runs/{run_id}/messages (reference §2.4):
// threadsvc.Service.FindRunMessages, paged as the thread-scoped endpoint.
func (s *Server) listRunMessages(w http.ResponseWriter, r *http.Request) error {
	runID, err := pathID(r, "run_id")
	if err != nil {
		return err
	}
	c, err := parseHistoryCursors(r)
	if err != nil {
		return err
	}
	page, err := s.threads.FindRunMessages(r.Context(), userOf(r), runID, c)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, page)
	return nil
}

// parseHistoryCursors reads the limit and cursors of the message
// endpoints: limit 1…200 (default 50), before_seq and after_seq >= 1.
func parseHistoryCursors(r *http.Request) (threadsvc.Cursors, error) {
	q := r.URL.Query()
	c, errs := readBackwardCursors(q)
	var errAfter error
	c.After, errAfter = querySeq(q, "after_seq")
	return c, queryProblems(append(errs, errAfter)...)
}

// readBackwardCursors reads the limit and before_seq of a history page,
// and returns each one's error (nil when it is good).
func readBackwardCursors(q url.Values) (threadsvc.Cursors, []error) {
	var c threadsvc.Cursors
	var errLimit, errBefore error
	c.Limit, errLimit = queryLimit(q, 50, 200)
	c.Before, errBefore = querySeq(q, "before_seq")
	return c, []error{errLimit, errBefore}
}
