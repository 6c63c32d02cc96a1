package httpapi

import (
	"context"
	"net/http"
	"strings"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/runevents"
)

// scanBatch is the number of message rows the visible-row scan reads per
// store query (reference §2.9).
const scanBatch = 201

// visibleScan is one visible-row scan of a thread's message rows.
type visibleScan struct {
	threadID      string
	owner         runevents.Owner
	limit, needed int
	before, after *int64
	// hidden holds the superseded runs, whose rows are skipped.
	hidden map[string]bool
	// dropInternal skips middleware rows and subagent AI rows too.
	dropInternal bool
}

// skips reports whether the scan leaves rec out.
func (p visibleScan) skips(rec *runevents.Record) bool {
	if p.hidden[rec.RunID] {
		return true
	}
	if !p.dropInternal {
		return false
	}
	caller, _ := rec.MetadataString("caller")
	if strings.HasPrefix(caller, runevents.MiddlewarePrefix) {
		return true
	}
	return strings.HasPrefix(caller, "subagent:") && messageType(rec.Content) == "ai"
}

// messageType returns a message's type: content.type, else content.role
// with "assistant" read as "ai".
func messageType(content []byte) string {
	obj, ok := jsonObject(content)
	if !ok {
		return ""
	}
	t, _ := jsonString(obj["type"])
	if t == "" {
		t, _ = jsonString(obj["role"])
	}
	if t == "assistant" {
		return "ai"
	}
	return t
}

// scanVisible reads message rows batch by batch until it has p.needed
// visible ones: backward from p.before (or the newest row), or, with
// p.after, forward from it up to p.before. It returns up to p.limit rows,
// ascending, and whether more visible rows were found than p.limit.
func (s *Server) scanVisible(ctx context.Context, store runevents.Store, p visibleScan) ([]runevents.Record, bool, error) {
	if p.after != nil {
		return s.scanForward(ctx, store, p)
	}
	var visible []runevents.Record // newest first
	cursor := p.before
	for len(visible) < p.needed {
		raw, err := store.ListMessages(ctx, runevents.ListMessagesParams{ThreadID: p.threadID, Owner: p.owner, Limit: scanBatch, BeforeSeq: cursor})
		if err != nil {
			return nil, false, err
		}
		if len(raw) == 0 {
			break
		}
		for i := len(raw) - 1; i >= 0 && len(visible) < p.needed; i-- {
			if !p.skips(&raw[i]) {
				visible = append(visible, raw[i])
			}
		}
		next := raw[0].Seq
		if cursor != nil && next >= *cursor {
			return nil, false, s.scanStuck(ctx, p, "backward", *cursor, next, len(raw))
		}
		cursor = &next
		if len(raw) < scanBatch {
			break
		}
	}
	hasMore := len(visible) > p.limit
	if hasMore {
		visible = visible[:p.limit]
	}
	for i, j := 0, len(visible)-1; i < j; i, j = i+1, j-1 {
		visible[i], visible[j] = visible[j], visible[i]
	}
	return visible, hasMore, nil
}

func (s *Server) scanForward(ctx context.Context, store runevents.Store, p visibleScan) ([]runevents.Record, bool, error) {
	var visible []runevents.Record
	cursor := *p.after
	for len(visible) < p.needed {
		raw, err := store.ListMessages(ctx, runevents.ListMessagesParams{ThreadID: p.threadID, Owner: p.owner, Limit: scanBatch, AfterSeq: &cursor})
		if err != nil {
			return nil, false, err
		}
		if len(raw) == 0 {
			break
		}
		bound := false
		for i := range raw {
			if p.before != nil && raw[i].Seq >= *p.before {
				bound = true
				break
			}
			if !p.skips(&raw[i]) {
				visible = append(visible, raw[i])
				if len(visible) == p.needed {
					break
				}
			}
		}
		next := raw[len(raw)-1].Seq
		if next <= cursor {
			return nil, false, s.scanStuck(ctx, p, "forward", cursor, next, len(raw))
		}
		cursor = next
		if bound || len(raw) < scanBatch {
			break
		}
	}
	hasMore := len(visible) > p.limit
	if hasMore {
		visible = visible[:p.limit]
	}
	return visible, hasMore, nil
}

// scanStuck reports a store page that did not move past the cursor: a
// broken store, answered as INTERNAL and logged with the scan's state.
func (s *Server) scanStuck(ctx context.Context, p visibleScan, direction string, cursor, next int64, rows int) error {
	s.logger.Error("visible-row scan did not advance", "request_id", requestID(ctx), "thread_id", p.threadID,
		"direction", direction, "scan_cursor", cursor, "next_cursor", next, "row_count", rows)
	return runstream.Errorf(runstream.CodeInternal, "message scan did not advance")
}

// hiddenRuns returns the superseded runs of a thread (reference §2.8):
// sources of successful regenerations, sources whose latest edit attempt
// is pending, running or successful, and edit attempts that ended in
// error, timeout or interruption.
func hiddenRuns(runs []runevents.ThreadRun) map[string]bool {
	hidden := map[string]bool{}
	latestEdit := map[string]runevents.ThreadRun{}
	for _, run := range runs { // oldest first
		meta, _ := jsonObject(run.Metadata)
		source, _ := jsonString(meta["regenerate_from_run_id"])
		if source == "" {
			continue
		}
		if run.OperationKind == "run" && run.Status == runevents.RunSuccess {
			hidden[source] = true
		}
		if kind, _ := jsonString(meta["replay_kind"]); kind != "edit" {
			continue
		}
		latestEdit[source] = run
		switch run.Status {
		case runevents.RunError, runevents.RunTimeout, runevents.RunInterrupted:
			hidden[run.RunID] = true
		}
	}
	for source, attempt := range latestEdit {
		switch attempt.Status {
		case runevents.RunPending, runevents.RunRunning, runevents.RunSuccess:
			hidden[source] = true
		}
	}
	return hidden
}

// historyEnv is what the two thread history endpoints read besides the
// message rows: the caller's run rows.
func (s *Server) historyEnv(r *http.Request, threadID string) (runevents.Store, runevents.RunStore, []runevents.ThreadRun, error) {
	store, err := s.runEvents()
	if err != nil {
		return nil, nil, nil, err
	}
	runs, err := s.threadRuns()
	if err != nil {
		return nil, nil, nil, err
	}
	if err := s.requireThread(r, threadID); err != nil {
		return nil, nil, nil, err
	}
	rows, err := runs.ListRuns(r.Context(), threadID, ownerOf(r))
	return store, runs, rows, err
}

// listThreadMessages is the legacy feed GET
// /api/threads/{thread_id}/messages (reference §2.1): limit 1…200
// (default 50), before_seq, after_seq; message rows without superseded
// runs (middleware and subagent rows stay), ascending, as a bare array.
// Each run's last llm.ai.response row of the page carries the caller's
// feedback on the run, every other row feedback null; turn_duration is
// stamped on each run's last non-middleware AI row of the page, for the
// thread's 100 most recent runs.
func (s *Server) listThreadMessages(w http.ResponseWriter, r *http.Request) error {
	threadID, err := pathID(r, "thread_id")
	if err != nil {
		return err
	}
	c, err := parseHistoryCursors(r)
	if err != nil {
		return err
	}
	store, runs, runRows, err := s.historyEnv(r, threadID)
	if err != nil {
		return err
	}
	ctx, owner := r.Context(), ownerOf(r)
	page, _, err := s.scanVisible(ctx, store, visibleScan{threadID: threadID, owner: owner, limit: c.limit, needed: c.limit,
		before: c.before, after: c.after, hidden: hiddenRuns(runRows)})
	if err != nil {
		return err
	}
	rows := newOutRows(page, true)
	lastAI := map[string]int{} // run → index in rows
	for i, rec := range page {
		if rec.EventType == runevents.EventLLMAIResponse {
			lastAI[rec.RunID] = i
		}
	}
	if len(lastAI) > 0 {
		ids := make([]string, 0, len(lastAI))
		for id := range lastAI {
			ids = append(ids, id)
		}
		feedback, err := runs.ListFeedback(ctx, threadID, ids, owner)
		if err != nil {
			return err
		}
		for run, i := range lastAI {
			if f, ok := feedback[run]; ok {
				rows[i].feedback = newFeedbackView(f)
			}
		}
	}
	recent := runRows
	if len(recent) > 100 {
		recent = recent[len(recent)-100:]
	}
	stampTurnDurations(rows, runDurations(recent))
	writeJSON(w, http.StatusOK, rows)
	return nil
}

// messagePage is the answer of GET /api/threads/{thread_id}/messages/page.
type messagePage struct {
	Data          []outRow `json:"data"`
	HasMore       bool     `json:"has_more"`
	NextBeforeSeq *int64   `json:"next_before_seq"`
}

// pageThreadMessages is GET /api/threads/{thread_id}/messages/page
// (reference §2.2), the thread history of the frontend: backward only
// (after_seq in any form is refused), limit 1…200 (default 50),
// before_seq. It leaves out middleware rows, subagent AI rows and
// superseded runs. Every row has feedback: the caller's feedback on the
// run on the run's last visible AI row of the whole thread, null
// elsewhere; turn_duration is stamped on each run's last non-middleware AI
// row of the page.
func (s *Server) pageThreadMessages(w http.ResponseWriter, r *http.Request) error {
	threadID, err := pathID(r, "thread_id")
	if err != nil {
		return err
	}
	q := r.URL.Query()
	if _, ok := q["after_seq"]; ok {
		return badParam("after_seq", "not supported by this backward-only endpoint")
	}
	c, err := parseHistoryCursors(r)
	if err != nil {
		return err
	}
	store, runs, runRows, err := s.historyEnv(r, threadID)
	if err != nil {
		return err
	}
	ctx, owner := r.Context(), ownerOf(r)
	page, hasMore, err := s.scanVisible(ctx, store, visibleScan{threadID: threadID, owner: owner, limit: c.limit, needed: c.limit + 1,
		before: c.before, hidden: hiddenRuns(runRows), dropInternal: true})
	if err != nil {
		return err
	}
	out := messagePage{Data: newOutRows(page, true), HasMore: hasMore}
	if hasMore && len(page) > 0 {
		out.NextBeforeSeq = &page[0].Seq
	}
	if len(page) > 0 {
		if err := attachLastAIFeedback(ctx, store, runs, threadID, owner, out.Data); err != nil {
			return err
		}
	}
	stampTurnDurations(out.Data, runDurations(runRows))
	writeJSON(w, http.StatusOK, out)
	return nil
}

// attachLastAIFeedback gives the caller's feedback on a run to the row
// that is the run's last visible AI row of the thread, when it is in rows.
func attachLastAIFeedback(ctx context.Context, store runevents.Store, runs runevents.RunStore, threadID string, owner runevents.Owner, rows []outRow) error {
	var ids []string
	seen := map[string]bool{}
	for _, row := range rows {
		if !seen[row.rec.RunID] {
			seen[row.rec.RunID] = true
			ids = append(ids, row.rec.RunID)
		}
	}
	lastAI, err := store.LastVisibleAISeqByRun(ctx, runevents.LastVisibleAIParams{ThreadID: threadID, RunIDs: ids, Owner: owner})
	if err != nil {
		return err
	}
	at := map[string]int{}
	var withRow []string
	for i, row := range rows {
		if seq, ok := lastAI[row.rec.RunID]; ok && seq == row.rec.Seq {
			at[row.rec.RunID] = i
			withRow = append(withRow, row.rec.RunID)
		}
	}
	if len(withRow) == 0 {
		return nil
	}
	feedback, err := runs.ListFeedback(ctx, threadID, withRow, owner)
	if err != nil {
		return err
	}
	for run, i := range at {
		if f, ok := feedback[run]; ok {
			rows[i].feedback = newFeedbackView(f)
		}
	}
	return nil
}
