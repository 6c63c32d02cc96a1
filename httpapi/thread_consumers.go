package httpapi

import (
	"net/http"
	"slices"
	"strings"

	"github.com/runstream/runstream/runevents"
)

// Limits of the run events endpoint.
const (
	defaultRunEventsLimit = 500
	maxRunEventsLimit     = 2000
	// maxEventTypesFilter bounds the distinct types of ?event_types=: the
	// catalogue has fewer, and each is a parameter of the store's query.
	maxEventTypesFilter = 64
)

// listThreadRunEvents is GET /api/threads/{thread_id}/runs/{run_id}/events
// (reference §2.5): rows of every category of the run as a bare array;
// event_types is a comma-separated list (split on "," as it is; empty
// means all), task_id matches metadata.task_id, limit 1…2000 (default
// 500), after_seq >= 1. The returned metadata lacks the top-level
// auth_token. At most maxEventTypesFilter distinct event types.
func (s *Server) listThreadRunEvents(w http.ResponseWriter, r *http.Request) error {
	threadID, runID, err := threadAndRun(r)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	p := runevents.ListEventsParams{ThreadID: threadID, RunID: runID}
	types, _, errTypes := queryValue(q, "event_types")
	if types != "" {
		for _, t := range strings.Split(types, ",") {
			if !slices.Contains(p.EventTypes, runevents.EventType(t)) {
				p.EventTypes = append(p.EventTypes, runevents.EventType(t))
			}
		}
		if len(p.EventTypes) > maxEventTypesFilter {
			errTypes = badParam("event_types", "names at most %d event types", maxEventTypesFilter)
		}
	}
	var errTask, errLimit, errAfter error
	p.TaskID, p.HasTaskID, errTask = queryValue(q, "task_id")
	p.Limit, errLimit = queryLimit(q, defaultRunEventsLimit, maxRunEventsLimit)
	p.AfterSeq, errAfter = querySeq(q, "after_seq")
	if err := queryProblems(errTypes, errTask, errLimit, errAfter); err != nil {
		return err
	}
	recs, err := s.threads.RunEvents(r.Context(), userOf(r), p)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, recs)
	return nil
}

// getWorkspaceChanges is GET
// /api/threads/{thread_id}/runs/{run_id}/workspace-changes (reference
// §2.6): include_files and include_diff default true →
// threadsvc.Service.WorkspaceChanges.
func (s *Server) getWorkspaceChanges(w http.ResponseWriter, r *http.Request) error {
	threadID, runID, err := threadAndRun(r)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	includeFiles, err := queryBool(q, "include_files", true)
	if err != nil {
		return err
	}
	includeDiff, err := queryBool(q, "include_diff", true)
	if err != nil {
		return err
	}
	changes, err := s.threads.WorkspaceChanges(r.Context(), userOf(r), threadID, runID, includeFiles, includeDiff)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, changes)
	return nil
}
