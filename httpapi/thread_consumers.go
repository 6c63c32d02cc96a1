package httpapi

import (
	"encoding/json"
	"maps"
	"net/http"
	"slices"
	"strings"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/runevents"
)

// runMessagePage is the answer of the run message endpoints.
type runMessagePage struct {
	Data    []outRow `json:"data"`
	HasMore bool     `json:"has_more"`
}

// runMessages reads limit+1 message rows of a run and keeps limit of
// them: the first ones when after_seq is given, else the last ones (the
// extra row is on the far side of the cursor).
func runMessages(r *http.Request, store runevents.Store, threadID, runID string, c historyCursors) (runMessagePage, error) {
	recs, err := store.ListMessagesByRun(r.Context(), runevents.ListMessagesByRunParams{ThreadID: threadID, RunID: runID,
		Owner: ownerOf(r), Limit: c.limit + 1, BeforeSeq: c.before, AfterSeq: c.after})
	if err != nil {
		return runMessagePage{}, err
	}
	page := runMessagePage{}
	if len(recs) > c.limit {
		page.HasMore = true
		if c.after != nil {
			recs = recs[:c.limit]
		} else {
			recs = recs[len(recs)-c.limit:]
		}
	}
	page.Data = newOutRows(recs, false)
	return page, nil
}

// listThreadRunMessages is GET
// /api/threads/{thread_id}/runs/{run_id}/messages (reference §2.3): limit
// 1…200 (default 50), before_seq, after_seq → {data, has_more}. No rows
// are filtered; the run's duration is stamped on its last non-middleware
// AI row when the caller has the run row.
func (s *Server) listThreadRunMessages(w http.ResponseWriter, r *http.Request) error {
	store, err := s.runEvents()
	if err != nil {
		return err
	}
	runs, err := s.threadRuns()
	if err != nil {
		return err
	}
	threadID, runID, err := threadAndRun(r)
	if err != nil {
		return err
	}
	c, err := parseHistoryCursors(r)
	if err != nil {
		return err
	}
	if err := s.requireThread(r, threadID); err != nil {
		return err
	}
	page, err := runMessages(r, store, threadID, runID, c)
	if err != nil {
		return err
	}
	if len(page.Data) > 0 {
		run, err := runs.GetRun(r.Context(), threadID, runID, ownerOf(r))
		switch {
		case err == nil:
			stampTurnDurations(page.Data, runDurations([]runevents.ThreadRun{run}))
		case runstream.ErrorCodeOf(err) != runstream.CodeNotFound:
			return err
		}
	}
	writeJSON(w, http.StatusOK, page)
	return nil
}

// listRunMessages is GET /api/runs/{run_id}/messages (reference §2.4):
// the run is looked up among the caller's run rows (NOT_FOUND when
// missing), then its message rows are paged as in the thread-scoped
// endpoint, without duration stamping.
func (s *Server) listRunMessages(w http.ResponseWriter, r *http.Request) error {
	store, err := s.runEvents()
	if err != nil {
		return err
	}
	runs, err := s.threadRuns()
	if err != nil {
		return err
	}
	runID, err := pathID(r, "run_id")
	if err != nil {
		return err
	}
	c, err := parseHistoryCursors(r)
	if err != nil {
		return err
	}
	run, err := runs.FindRun(r.Context(), runID, ownerOf(r))
	if err != nil {
		return err
	}
	page, err := runMessages(r, store, run.ThreadID, runID, c)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, page)
	return nil
}

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
	store, err := s.runEvents()
	if err != nil {
		return err
	}
	threadID, runID, err := threadAndRun(r)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	p := runevents.ListEventsParams{ThreadID: threadID, RunID: runID, Owner: ownerOf(r)}
	types, _, err := queryValue(q, "event_types")
	if err != nil {
		return err
	}
	if types != "" {
		for _, t := range strings.Split(types, ",") {
			if !slices.Contains(p.EventTypes, runevents.EventType(t)) {
				p.EventTypes = append(p.EventTypes, runevents.EventType(t))
			}
		}
		if len(p.EventTypes) > maxEventTypesFilter {
			return badParam("event_types", "names at most %d event types", maxEventTypesFilter)
		}
	}
	if p.TaskID, _, err = queryValue(q, "task_id"); err != nil {
		return err
	}
	if p.Limit, err = queryLimit(q, defaultRunEventsLimit, maxRunEventsLimit); err != nil {
		return err
	}
	if p.AfterSeq, err = querySeq(q, "after_seq"); err != nil {
		return err
	}
	if err := s.requireThread(r, threadID); err != nil {
		return err
	}
	recs, err := store.ListEvents(r.Context(), p)
	if err != nil {
		return err
	}
	for i := range recs {
		recs[i].Metadata = withoutAuthToken(recs[i].Metadata)
	}
	if recs == nil {
		recs = []runevents.Record{}
	}
	writeJSON(w, http.StatusOK, recs)
	return nil
}

// emptyWorkspaceChanges is the answer for a run without workspace changes.
func emptyWorkspaceChanges() map[string]any {
	return map[string]any{"available": false, "version": 1, "summary": emptyWorkspaceSummary(), "files": []any{}, "limits": map[string]any{}}
}

func emptyWorkspaceSummary() map[string]any {
	return map[string]any{"created": 0, "modified": 0, "deleted": 0, "symlink_created": 0, "additions": 0, "deletions": 0, "truncated": false}
}

// getWorkspaceChanges is GET
// /api/threads/{thread_id}/runs/{run_id}/workspace-changes (reference
// §2.6), include_files and include_diff default true. It projects the
// run's newest workspace_changes row: metadata.workspace_changes, else an
// object content, plus available=true; summary defaults to zeros, files to
// []; include_files=false empties files and include_diff=false blanks
// every file's diff. Without such a row it answers available=false with a
// zero summary. (The original reads only the first 10 rows; this reads the
// newest.)
func (s *Server) getWorkspaceChanges(w http.ResponseWriter, r *http.Request) error {
	store, err := s.runEvents()
	if err != nil {
		return err
	}
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
	if err := s.requireThread(r, threadID); err != nil {
		return err
	}
	var last *runevents.Record
	p := runevents.ListEventsParams{ThreadID: threadID, RunID: runID, Owner: ownerOf(r), Limit: defaultRunEventsLimit,
		EventTypes: []runevents.EventType{runevents.EventWorkspaceChanges}}
	for {
		recs, err := store.ListEvents(r.Context(), p)
		if err != nil {
			return err
		}
		if len(recs) > 0 {
			last = &recs[len(recs)-1]
			p.AfterSeq = &last.Seq
		}
		if len(recs) < p.Limit {
			break
		}
	}
	writeJSON(w, http.StatusOK, workspaceChanges(last, includeFiles, includeDiff))
	return nil
}

func workspaceChanges(rec *runevents.Record, includeFiles, includeDiff bool) map[string]any {
	if rec == nil {
		return emptyWorkspaceChanges()
	}
	var payload map[string]any
	var meta map[string]json.RawMessage
	if json.Unmarshal(rec.Metadata, &meta) == nil && meta["workspace_changes"] != nil {
		json.Unmarshal(meta["workspace_changes"], &payload)
	} else {
		json.Unmarshal(rec.Content, &payload)
	}
	if payload == nil {
		return emptyWorkspaceChanges()
	}
	out := maps.Clone(payload)
	out["available"] = true
	if _, ok := out["summary"]; !ok {
		out["summary"] = emptyWorkspaceSummary()
	}
	if !includeFiles {
		out["files"] = []any{}
		return out
	}
	files, _ := out["files"].([]any)
	if files == nil {
		out["files"] = []any{}
		return out
	}
	if !includeDiff {
		blank := make([]any, len(files))
		for i, f := range files {
			if obj, ok := f.(map[string]any); ok {
				obj = maps.Clone(obj)
				obj["diff"] = ""
				f = obj
			}
			blank[i] = f
		}
		out["files"] = blank
	}
	return out
}
