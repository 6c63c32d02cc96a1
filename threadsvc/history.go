package threadsvc

import (
	"context"
	"fmt"
	"strings"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/runevents"
)

// Cursors are the limit and cursors of a message read: Limit rows at
// most, before seq Before and after seq After when they are set.
type Cursors struct {
	Limit         int
	Before, After *int64
}

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
	if strings.HasPrefix(caller, runevents.MiddlewareCallerPrefix) {
		return true
	}
	return strings.HasPrefix(caller, runevents.SubagentCallerPrefix) && messageType(rec.Content) == "ai"
}

// shownAI reports whether rec is an AI response the user is shown: not a
// middleware's, not a subagent's, and not hidden from the UI
// (content.additional_kwargs.hide_from_ui). A run's feedback goes on its
// last such row (DeerFlow puts it on the last AI row that is not a
// middleware's, which may be one nobody sees: reference §8.1 #9, #10).
func shownAI(rec *runevents.Record) bool {
	if !rec.LeadAI() {
		return false
	}
	obj, ok := jsonObject(rec.Content)
	if !ok {
		return true
	}
	kwargs, ok := jsonObject(obj["additional_kwargs"])
	return !ok || string(kwargs["hide_from_ui"]) != "true"
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
func (s *Service) scanVisible(ctx context.Context, p visibleScan) ([]runevents.Record, bool, error) {
	if p.after != nil {
		return s.scanForward(ctx, p)
	}
	var visible []runevents.Record // newest first
	cursor := p.before
	for len(visible) < p.needed {
		raw, err := s.events.ListMessages(ctx, runevents.ListMessagesParams{ThreadID: p.threadID, Owner: p.owner, Limit: scanBatch, BeforeSeq: cursor})
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
			return nil, false, scanStuck(p, "backward", *cursor, next, len(raw))
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

func (s *Service) scanForward(ctx context.Context, p visibleScan) ([]runevents.Record, bool, error) {
	var visible []runevents.Record
	cursor := *p.after
	for len(visible) < p.needed {
		raw, err := s.events.ListMessages(ctx, runevents.ListMessagesParams{ThreadID: p.threadID, Owner: p.owner, Limit: scanBatch, AfterSeq: &cursor})
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
			return nil, false, scanStuck(p, "forward", cursor, next, len(raw))
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
// broken store, INTERNAL with the scan's state as its cause.
func scanStuck(p visibleScan, direction string, cursor, next int64, rows int) error {
	return runstream.Wrap(fmt.Errorf("visible-row scan did not advance: thread_id=%s direction=%s scan_cursor=%d next_cursor=%d row_count=%d",
		p.threadID, direction, cursor, next, rows), runstream.CodeInternal, "message scan did not advance")
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

// history returns the user's run rows of the thread, which the message
// feeds read besides the message rows. A thread the user has nothing of
// (unknown, empty or another user's) has none: its feeds are empty pages,
// as in the original, and tell a foreign thread from a missing one by
// nothing.
func (s *Service) history(ctx context.Context, owner runevents.Owner, threadID string) ([]runevents.ThreadRun, error) {
	return s.runs.ListRuns(ctx, threadID, owner)
}

// Messages is the legacy feed (reference §2.1): the user's message rows
// of the thread without superseded runs (middleware and subagent rows
// stay), ascending, paged by c. Each run's last shown llm.ai.response row
// of the page (shownAI) carries the user's feedback on the run, every other row
// feedback null; turn_duration is stamped on each run's last
// non-middleware AI row of the page, for the thread's 100 most recent
// runs.
func (s *Service) Messages(ctx context.Context, user, threadID string, c Cursors) ([]Row, error) {
	owner := runevents.OwnedBy(user)
	runRows, err := s.history(ctx, owner, threadID)
	if err != nil {
		return nil, err
	}
	page, _, err := s.scanVisible(ctx, visibleScan{threadID: threadID, owner: owner, limit: c.Limit, needed: c.Limit,
		before: c.Before, after: c.After, hidden: hiddenRuns(runRows)})
	if err != nil {
		return nil, err
	}
	rows := newRows(page, true)
	lastAI := map[string]int{} // run → index in rows
	for i := range page {
		// The contract's documented limitation: the legacy feed enriches
		// llm.ai.response rows only, never their legacy alias ai_message.
		if page[i].EventType == runevents.EventLLMAIResponse && shownAI(&page[i]) {
			lastAI[page[i].RunID] = i
		}
	}
	if len(lastAI) > 0 {
		ids := make([]string, 0, len(lastAI))
		for id := range lastAI {
			ids = append(ids, id)
		}
		feedback, err := s.runs.ListFeedback(ctx, threadID, ids, owner)
		if err != nil {
			return nil, err
		}
		for run, i := range lastAI {
			if f, ok := feedback[run]; ok {
				rows[i].feedback = NewFeedbackView(f)
			}
		}
	}
	recent := runRows
	if len(recent) > 100 {
		recent = recent[len(recent)-100:]
	}
	stampTurnDurations(rows, runDurations(recent))
	return rows, nil
}

// MessagePage is a page of the thread history of the frontend.
type MessagePage struct {
	Data          []Row  `json:"data"`
	HasMore       bool   `json:"has_more"`
	NextBeforeSeq *int64 `json:"next_before_seq"`
}

// MessagePage is the thread history of the frontend (reference §2.2),
// read backward only (c.After is not used) before c.Before. It leaves out
// middleware rows, subagent AI rows and superseded runs. Every row has
// feedback: the user's feedback on the run on the run's last visible AI
// row of the whole thread, null elsewhere; turn_duration is stamped on
// each run's last non-middleware AI row of the page.
func (s *Service) MessagePage(ctx context.Context, user, threadID string, c Cursors) (MessagePage, error) {
	owner := runevents.OwnedBy(user)
	runRows, err := s.history(ctx, owner, threadID)
	if err != nil {
		return MessagePage{}, err
	}
	page, hasMore, err := s.scanVisible(ctx, visibleScan{threadID: threadID, owner: owner, limit: c.Limit, needed: c.Limit + 1,
		before: c.Before, hidden: hiddenRuns(runRows), dropInternal: true})
	if err != nil {
		return MessagePage{}, err
	}
	out := MessagePage{Data: newRows(page, true), HasMore: hasMore}
	if hasMore && len(page) > 0 {
		out.NextBeforeSeq = &page[0].Seq
	}
	if len(page) > 0 {
		if err := s.attachLastAIFeedback(ctx, threadID, owner, out.Data); err != nil {
			return MessagePage{}, err
		}
	}
	stampTurnDurations(out.Data, runDurations(runRows))
	return out, nil
}

// lastShownAI returns, for each run of runIDs whose last shown AI row
// (shownAI) is among known (the rows of a page, by seq), that row's seq.
// The store names each run's last AI row that is not a middleware's; when
// that row is a subagent's or hidden, the run's rows before it are read,
// a page at a time, down to the run's first row in known, for the last
// shown one: a row below it is not on the page, so its run gets no row.
func (s *Service) lastShownAI(ctx context.Context, threadID string, runIDs []string, owner runevents.Owner, known map[int64]*runevents.Record) (map[string]int64, error) {
	candidates, err := s.events.LastVisibleAISeqByRun(ctx, runevents.LastVisibleAIParams{ThreadID: threadID, RunIDs: runIDs, Owner: owner})
	if err != nil {
		return nil, err
	}
	floor := map[string]int64{} // each run's lowest seq in known
	for seq, rec := range known {
		if f, ok := floor[rec.RunID]; !ok || seq < f {
			floor[rec.RunID] = seq
		}
	}
	out := make(map[string]int64, len(candidates))
	for run, seq := range candidates {
		f, ok := floor[run]
		if !ok || seq < f {
			continue // the run's last AI row is below the page
		}
		if rec, ok := known[seq]; ok && shownAI(rec) {
			out[run] = seq
			continue
		}
		seq, found, err := s.lastShownAIBetween(ctx, threadID, run, owner, f, seq+1)
		if err != nil {
			return nil, err
		}
		if found {
			out[run] = seq
		}
	}
	return out, nil
}

// lastShownAIBetween reads a run's message rows from before down to
// floor (seq >= floor, < before), newest first, a page at a time, until
// it meets a shown AI row.
func (s *Service) lastShownAIBetween(ctx context.Context, threadID, runID string, owner runevents.Owner, floor, before int64) (int64, bool, error) {
	const page = 100
	for {
		recs, err := s.events.ListMessagesByRun(ctx, runevents.ListMessagesByRunParams{ThreadID: threadID, RunID: runID, Owner: owner, Limit: page, BeforeSeq: &before})
		if err != nil {
			return 0, false, err
		}
		for i := len(recs) - 1; i >= 0 && recs[i].Seq >= floor; i-- {
			if shownAI(&recs[i]) {
				return recs[i].Seq, true, nil
			}
		}
		if len(recs) < page || recs[0].Seq <= floor {
			return 0, false, nil
		}
		before = recs[0].Seq
	}
}

// attachLastAIFeedback gives the caller's feedback on a run to the row
// that is the run's last visible AI row of the thread, when it is in rows:
// the rating of the whole run, else the newest rating of a message
// (RunStore.ListFeedback).
func (s *Service) attachLastAIFeedback(ctx context.Context, threadID string, owner runevents.Owner, rows []Row) error {
	var ids []string
	seen := map[string]bool{}
	for _, row := range rows {
		if !seen[row.rec.RunID] {
			seen[row.rec.RunID] = true
			ids = append(ids, row.rec.RunID)
		}
	}
	known := make(map[int64]*runevents.Record, len(rows))
	for i := range rows {
		known[rows[i].rec.Seq] = &rows[i].rec
	}
	lastAI, err := s.lastShownAI(ctx, threadID, ids, owner, known)
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
	feedback, err := s.runs.ListFeedback(ctx, threadID, withRow, owner)
	if err != nil {
		return err
	}
	for run, i := range at {
		if f, ok := feedback[run]; ok {
			rows[i].feedback = NewFeedbackView(f)
		}
	}
	return nil
}
