package threadsvc

import (
	"context"
	"encoding/json"
	"maps"
	"math"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/runevents"
)

// RunMessagePage is a page of a run's message rows.
type RunMessagePage struct {
	Data    []Row `json:"data"`
	HasMore bool  `json:"has_more"`
}

// runMessages reads c.Limit+1 message rows of a run and keeps c.Limit of
// them: the first ones when c.After is set, else the last ones (the extra
// row is on the far side of the cursor).
func (s *Service) runMessages(ctx context.Context, owner runevents.Owner, threadID, runID string, c Cursors) (RunMessagePage, error) {
	recs, err := s.events.ListMessagesByRun(ctx, runevents.ListMessagesByRunParams{ThreadID: threadID, RunID: runID,
		Owner: owner, Limit: c.Limit + 1, BeforeSeq: c.Before, AfterSeq: c.After})
	if err != nil {
		return RunMessagePage{}, err
	}
	page := RunMessagePage{}
	if len(recs) > c.Limit {
		page.HasMore = true
		if c.After != nil {
			recs = recs[:c.Limit]
		} else {
			recs = recs[len(recs)-c.Limit:]
		}
	}
	page.Data = newRows(recs, false)
	return page, nil
}

// RunMessages is the message rows of a run of the thread (reference
// §2.3), paged by c. No rows are filtered; the run's duration is stamped
// on its last non-middleware AI row when the user has the run row.
func (s *Service) RunMessages(ctx context.Context, user, threadID, runID string, c Cursors) (RunMessagePage, error) {
	owner := runevents.OwnedBy(user)
	page, err := s.runMessages(ctx, owner, threadID, runID, c)
	if err != nil {
		return RunMessagePage{}, err
	}
	if len(page.Data) > 0 {
		run, err := s.runs.GetRun(ctx, threadID, runID, owner)
		switch {
		case err == nil:
			stampTurnDurations(page.Data, runDurations([]runevents.ThreadRun{run}))
		case runstream.ErrorCodeOf(err) != runstream.CodeNotFound:
			return RunMessagePage{}, err
		}
	}
	return page, nil
}

// FindRunMessages is the message rows of one of the user's runs, looked
// up by its id among their run rows (NOT_FOUND when missing), paged as in
// RunMessages, without duration stamping (reference §2.4).
func (s *Service) FindRunMessages(ctx context.Context, user, runID string, c Cursors) (RunMessagePage, error) {
	owner := runevents.OwnedBy(user)
	run, err := s.findUserRun(ctx, user, runID)
	if err != nil {
		return RunMessagePage{}, err
	}
	return s.runMessages(ctx, owner, run.ThreadID, runID, c)
}

// RunEvents is the user's rows of every category of a run (reference
// §2.5), selected by p (whose Owner it sets), never nil. The returned
// metadata lacks the top-level auth_token.
func (s *Service) RunEvents(ctx context.Context, user string, p runevents.ListEventsParams) ([]runevents.Record, error) {
	p.Owner = runevents.OwnedBy(user)
	recs, err := s.events.ListEvents(ctx, p)
	if err != nil {
		return nil, err
	}
	for i := range recs {
		recs[i].Metadata = withoutAuthToken(recs[i].Metadata)
	}
	if recs == nil {
		recs = []runevents.Record{}
	}
	return recs, nil
}

// workspacePage is the rows one read of workspace changes takes.
const workspacePage = 500

// WorkspaceChanges projects the run's newest workspace_changes row
// (reference §2.6): metadata.workspace_changes, else an object content,
// plus available=true; summary defaults to zeros, files to []; without
// includeFiles files is empty and without includeDiff every file's diff
// is blank. Without such a row it is available=false with a zero
// summary. (The original reads only the first 10 rows; this reads the
// newest.)
func (s *Service) WorkspaceChanges(ctx context.Context, user, threadID, runID string, includeFiles, includeDiff bool) (map[string]any, error) {
	var last *runevents.Record
	p := runevents.ListEventsParams{ThreadID: threadID, RunID: runID, Owner: runevents.OwnedBy(user), Limit: workspacePage,
		EventTypes: []runevents.EventType{runevents.EventWorkspaceChanges}}
	for {
		recs, err := s.events.ListEvents(ctx, p)
		if err != nil {
			return nil, err
		}
		if len(recs) > 0 {
			last = &recs[len(recs)-1]
			p.AfterSeq = &last.Seq
		}
		if len(recs) < p.Limit {
			break
		}
	}
	return workspaceChanges(last, includeFiles, includeDiff), nil
}

// emptyWorkspaceChanges is the answer for a run without workspace changes.
func emptyWorkspaceChanges() map[string]any {
	return map[string]any{"available": false, "version": 1, "summary": emptyWorkspaceSummary(), "files": []any{}, "limits": map[string]any{}}
}

func emptyWorkspaceSummary() map[string]any {
	return map[string]any{"created": 0, "modified": 0, "deleted": 0, "symlink_created": 0, "additions": 0, "deletions": 0, "truncated": false}
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

// TokenUsage is a thread's token usage summed from its run rows.
type TokenUsage struct {
	ThreadID          string                  `json:"thread_id"`
	TotalTokens       int64                   `json:"total_tokens"`
	TotalInputTokens  int64                   `json:"total_input_tokens"`
	TotalOutputTokens int64                   `json:"total_output_tokens"`
	TotalRuns         int                     `json:"total_runs"`
	ByModel           map[string]*ModelTokens `json:"by_model"`
	ByCaller          map[string]int64        `json:"by_caller"`
	ContextUsage      *ContextUsage           `json:"context_usage"`
}

// ModelTokens is the tokens and runs of one model.
type ModelTokens struct {
	Tokens int64 `json:"tokens"`
	Runs   int   `json:"runs"`
}

// TokenUsage sums the token usage of the user's run rows of the thread,
// never of events, over runs with operation_kind "run" and status success
// or error (and running with includeActive). ByModel adds each model of a
// run's token_usage_by_model, or, when the run has none, its model_name
// (else "unknown") with the run's total. ContextUsage is read from the
// usage of the thread's last lead AI message (contextUsage), null when
// there is none.
func (s *Service) TokenUsage(ctx context.Context, user, threadID string, includeActive bool) (TokenUsage, error) {
	rows, err := s.runs.ListRuns(ctx, threadID, runevents.OwnedBy(user))
	if err != nil {
		return TokenUsage{}, err
	}
	out := TokenUsage{ThreadID: threadID, ByModel: map[string]*ModelTokens{},
		ByCaller: map[string]int64{"lead_agent": 0, "subagent": 0, "middleware": 0}}
	add := func(model string, tokens int64) {
		sum := out.ByModel[model]
		if sum == nil {
			sum = &ModelTokens{}
			out.ByModel[model] = sum
		}
		sum.Tokens = addTokens(sum.Tokens, tokens)
		sum.Runs++
	}
	for _, run := range rows {
		counted := run.Status == runevents.RunSuccess || run.Status == runevents.RunError || (includeActive && run.Status == runevents.RunRunning)
		if run.OperationKind != "run" || !counted {
			continue
		}
		u := run.Usage
		out.TotalRuns++
		out.TotalTokens = addTokens(out.TotalTokens, u.TotalTokens)
		out.TotalInputTokens = addTokens(out.TotalInputTokens, u.TotalInputTokens)
		out.TotalOutputTokens = addTokens(out.TotalOutputTokens, u.TotalOutputTokens)
		out.ByCaller["lead_agent"] = addTokens(out.ByCaller["lead_agent"], u.LeadAgentTokens)
		out.ByCaller["subagent"] = addTokens(out.ByCaller["subagent"], u.SubagentTokens)
		out.ByCaller["middleware"] = addTokens(out.ByCaller["middleware"], u.MiddlewareTokens)
		if len(u.ByModel) > 0 {
			for model, mu := range u.ByModel {
				add(model, mu.TotalTokens)
			}
			continue
		}
		model := run.ModelName
		if model == "" {
			model = "unknown"
		}
		add(model, u.TotalTokens)
	}
	out.ContextUsage, err = s.contextUsage(ctx, user, threadID, rows)
	if err != nil {
		return TokenUsage{}, err
	}
	return out, nil
}

// addTokens adds two token counts (each >= 0), saturating at the largest
// int64 rather than wrapping to a negative total.
func addTokens(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}
