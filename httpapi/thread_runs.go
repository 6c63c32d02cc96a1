package httpapi

import (
	"net/http"
)

// getThreadTokenUsage is GET /api/threads/{thread_id}/token-usage
// (?include_active=false): threadsvc.Service.TokenUsage.
func (s *Server) getThreadTokenUsage(w http.ResponseWriter, r *http.Request) error {
	threadID, err := pathID(r, "thread_id")
	if err != nil {
		return err
	}
	includeActive, err := queryBool(r.URL.Query(), "include_active", false)
	if err != nil {
		return err
	}
	usage, err := s.threads.TokenUsage(r.Context(), userOf(r), threadID, includeActive)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, usage)
	return nil
}
