package sqlite

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/runstream/runstream/runevents"
)

// where builds the conjunction of a query's conditions and its arguments.
type where struct {
	conds []string
	args  []any
}

func (w *where) add(cond string, args ...any) {
	w.conds = append(w.conds, cond)
	w.args = append(w.args, args...)
}

// owner restricts the rows to o's unless o is AnyOwner.
func (w *where) owner(o runevents.Owner) {
	if !o.All() {
		w.add("user_id = ?", o.UserID())
	}
}

// cursors adds the exclusive seq bounds that are set.
func (w *where) cursors(after, before *int64) {
	if after != nil {
		w.add("seq > ?", *after)
	}
	if before != nil {
		w.add("seq < ?", *before)
	}
}

// in adds "column IN (?, ?, …)"; no values match no row.
func (w *where) in(column string, values []any) {
	if len(values) == 0 {
		w.add("0")
		return
	}
	w.add(column+" IN (?"+strings.Repeat(", ?", len(values)-1)+")", values...)
}

func (w *where) String() string { return strings.Join(w.conds, " AND ") }

// query is a SELECT and its arguments.
type query struct {
	sql  string
	args []any
}

// selectQuery selects the rows of w ascending when first is set (the
// first limit rows), else descending (the last limit rows, which the
// caller reverses).
func selectQuery(w where, first bool, limit int) query {
	order := " ORDER BY seq ASC LIMIT ?"
	if !first {
		order = " ORDER BY seq DESC LIMIT ?"
	}
	return query{
		sql:  "SELECT " + packedRecordColumns + " FROM run_events WHERE " + w.String() + order,
		args: append(w.args, limit),
	}
}

// The literal category = 'message' (not a parameter) lets SQLite use the
// partial message indexes.

// listMessagesQuery reads the window's first rows when AfterSeq is set,
// else its last rows, newest first.
func listMessagesQuery(p runevents.ListMessagesParams) query {
	w := where{}
	w.add("thread_id = ?", p.ThreadID)
	w.add("category = 'message'")
	w.cursors(p.AfterSeq, p.BeforeSeq)
	w.owner(p.Owner)
	return selectQuery(w, p.AfterSeq != nil, p.Limit)
}

// listMessagesByRunQuery reads like listMessagesQuery.
func listMessagesByRunQuery(p runevents.ListMessagesByRunParams) query {
	w := where{}
	w.add("thread_id = ?", p.ThreadID)
	w.add("run_id = ?", p.RunID)
	w.add("category = 'message'")
	w.cursors(p.AfterSeq, p.BeforeSeq)
	w.owner(p.Owner)
	return selectQuery(w, p.AfterSeq != nil, p.Limit)
}

func listEventsQuery(p runevents.ListEventsParams) query {
	w := where{}
	w.add("thread_id = ?", p.ThreadID)
	w.add("run_id = ?", p.RunID)
	if len(p.EventTypes) > 0 {
		types := make([]any, len(p.EventTypes))
		for i, t := range p.EventTypes {
			types[i] = string(t)
		}
		w.in("event_type", types)
	}
	if p.FiltersTask() {
		w.add("task_id = ?", p.TaskID)
	}
	w.cursors(p.AfterSeq, nil)
	w.owner(p.Owner)
	return selectQuery(w, true, p.Limit)
}

// ListMessages returns the thread's message rows in the cursor window.
func (s *RunEventStore) ListMessages(ctx context.Context, p runevents.ListMessagesParams) ([]runevents.Record, error) {
	if err := firstError(s.checkOpen(), p.Validate()); err != nil {
		return nil, err
	}
	return s.queryRecords(ctx, "sqlite: list messages", listMessagesQuery(p), p.AfterSeq == nil)
}

// ListMessagesByRun returns one run's message rows in the cursor window.
func (s *RunEventStore) ListMessagesByRun(ctx context.Context, p runevents.ListMessagesByRunParams) ([]runevents.Record, error) {
	if err := firstError(s.checkOpen(), p.Validate()); err != nil {
		return nil, err
	}
	return s.queryRecords(ctx, "sqlite: list messages by run", listMessagesByRunQuery(p), p.AfterSeq == nil)
}

// ListEvents returns the first rows of one run after the cursor, filtered
// by event type and task id in SQL before the limit.
func (s *RunEventStore) ListEvents(ctx context.Context, p runevents.ListEventsParams) ([]runevents.Record, error) {
	if err := firstError(s.checkOpen(), p.Validate()); err != nil {
		return nil, err
	}
	return s.queryRecords(ctx, "sqlite: list events", listEventsQuery(p), false)
}

// LastVisibleAISeqByRun returns the highest seq of a visible AI response
// per requested run that has one.
func (s *RunEventStore) LastVisibleAISeqByRun(ctx context.Context, p runevents.LastVisibleAIParams) (map[string]int64, error) {
	if err := firstError(s.checkOpen(), p.Validate()); err != nil {
		return nil, err
	}
	out := map[string]int64{}
	// Chunks keep the statement far below SQLite's parameter limit.
	for runIDs := range slices.Chunk(p.RunIDs, 500) {
		q := lastVisibleAIQuery(p.ThreadID, runIDs, p.Owner)
		if err := s.scanLastSeqs(ctx, q, out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// lastVisibleAIQuery selects (run_id, max(seq)) of the visible AI
// responses of runIDs.
func lastVisibleAIQuery(threadID string, runIDs []string, owner runevents.Owner) query {
	ids := make([]any, len(runIDs))
	for i, id := range runIDs {
		ids[i] = id
	}
	w := where{}
	w.add("thread_id = ?", threadID)
	w.add("category = 'message'")
	w.in("run_id", ids)
	w.in("event_type", []any{string(runevents.EventLLMAIResponse), string(runevents.EventLegacyAIMessage)})
	w.add("middleware_caller = 0")
	w.owner(owner)
	return query{sql: "SELECT run_id, max(seq) FROM run_events WHERE " + w.String() + " GROUP BY run_id", args: w.args}
}

// scanLastSeqs runs q, a lastVisibleAIQuery, and adds its rows to out.
func (s *RunEventStore) scanLastSeqs(ctx context.Context, q query, out map[string]int64) error {
	const op = "sqlite: last visible AI seq by run"
	rows, err := s.db.reads.query(ctx, q.sql, q.args...)
	if err != nil {
		return sqlError(op, err)
	}
	defer rows.Close()
	for rows.Next() {
		var runID string
		var seq int64
		if err := rows.Scan(&runID, &seq); err != nil {
			return sqlError(op, err)
		}
		out[runID] = seq
	}
	if err := rows.Err(); err != nil {
		return sqlError(op, err)
	}
	return nil
}

// countMessagesQuery counts the thread's message rows visible to owner.
func countMessagesQuery(threadID string, owner runevents.Owner) query {
	w := where{}
	w.add("thread_id = ?", threadID)
	w.add("category = 'message'")
	w.owner(owner)
	return query{sql: "SELECT count(*) FROM run_events WHERE " + w.String(), args: w.args}
}

// CountMessages returns the number of the thread's message rows visible to
// owner.
func (s *RunEventStore) CountMessages(ctx context.Context, threadID string, owner runevents.Owner) (int, error) {
	if err := firstError(s.checkOpen(), runevents.ValidateID("thread_id", threadID), runevents.CheckOwner(owner)); err != nil {
		return 0, err
	}
	q := countMessagesQuery(threadID, owner)
	var n int
	if err := s.db.reads.queryRow(ctx, q.sql, q.args...).Scan(&n); err != nil {
		return 0, sqlError("sqlite: count messages", err)
	}
	return n, nil
}

// queryRecords runs q on the read pool and returns its rows ascending by
// seq (reversing them when q reads newest first).
func (s *RunEventStore) queryRecords(ctx context.Context, op string, q query, reversed bool) ([]runevents.Record, error) {
	rows, err := s.db.reads.query(ctx, q.sql, q.args...)
	if err != nil {
		return nil, sqlError(op, err)
	}
	defer rows.Close()
	var out []runevents.Record
	var packed string
	for rows.Next() {
		rec, err := scanPackedRecord(rows, &packed)
		if err != nil {
			return nil, sqlError(op, err)
		}
		out = append(out, rec)
	}
	if err := rows.Err(); err != nil {
		return nil, sqlError(op, err)
	}
	if reversed {
		slices.Reverse(out)
	}
	return out, nil
}

// scanRecord reads the recordColumns of one row into a fresh Record.
func scanRecord(row interface{ Scan(...any) error }) (runevents.Record, error) {
	var (
		r                   runevents.Record
		eventType, category string
		createdAt           string
	)
	if err := row.Scan(&r.ThreadID, &r.RunID, &r.UserID, &eventType, &category,
		(*[]byte)(&r.Content), (*[]byte)(&r.Metadata), &r.Seq, &createdAt); err != nil {
		return runevents.Record{}, err
	}
	r.EventType, r.Category = runevents.EventType(eventType), runevents.Category(category)
	t, err := parseCreatedAt(createdAt)
	if err != nil {
		return runevents.Record{}, err
	}
	r.CreatedAt = t
	return r, nil
}

// packedRecordColumns are the columns scanPackedRecord reads: the seq, then
// every other column of the record in one text value, each field's length
// in bytes first ("13,5,5,…:<thread_id><run_id>…<metadata>"; metadata takes
// the rest). Reading two columns instead of nine is what makes a page cheap:
// the driver locks the connection and allocates once per column of a row.
const packedRecordColumns = `seq, concat(octet_length(thread_id), ',', octet_length(run_id), ',', octet_length(user_id), ',',
	octet_length(event_type), ',', octet_length(category), ',', octet_length(created_at), ',', octet_length(content), ':',
	thread_id, run_id, user_id, event_type, category, created_at, content, metadata)`

// scanPackedRecord reads the packedRecordColumns of one row into a fresh
// Record. The record's strings share the row's packed value; content and
// metadata are copies of their part. packed is scratch space the caller
// keeps across rows.
func scanPackedRecord(row interface{ Scan(...any) error }, packed *string) (runevents.Record, error) {
	var seq int64
	if err := row.Scan(&seq, packed); err != nil {
		return runevents.Record{}, err
	}
	f, err := splitPacked(seq, *packed)
	if err != nil {
		return runevents.Record{}, err
	}
	return recordOf(f)
}

// recordOf decodes a row's text into a fresh Record, whose strings share
// f's; content and metadata are copies.
func recordOf(f runevents.RecordText[string]) (runevents.Record, error) {
	t, err := parseCreatedAt(f.CreatedAt)
	if err != nil {
		return runevents.Record{}, err
	}
	return runevents.Record{ThreadID: f.ThreadID, RunID: f.RunID, UserID: f.UserID,
		EventType: runevents.EventType(f.EventType), Category: runevents.Category(f.Category),
		Content: []byte(f.Content), Metadata: []byte(f.Metadata), Seq: f.Seq, CreatedAt: t}, nil
}

// splitPacked splits the packed value p of the row of seq seq (see
// packedRecordColumns) into the row's text, which shares p.
func splitPacked(seq int64, p string) (runevents.RecordText[string], error) {
	head, body, ok := strings.Cut(p, ":")
	var n [7]int
	total := 0
	for i := range n {
		var field string
		field, head, _ = strings.Cut(head, ",")
		v, err := strconv.Atoi(field)
		if err != nil || v < 0 {
			ok = false
			break
		}
		n[i], total = v, total+v
	}
	if !ok || head != "" || total > len(body) {
		return runevents.RecordText[string]{}, fmt.Errorf("seq %d: malformed packed row", seq)
	}
	next := func(i int) string {
		v := body[:n[i]]
		body = body[n[i]:]
		return v
	}
	f := runevents.RecordText[string]{Seq: seq}
	f.ThreadID, f.RunID, f.UserID = next(0), next(1), next(2)
	f.EventType, f.Category = next(3), next(4)
	f.CreatedAt, f.Content, f.Metadata = next(5), next(6), body
	return f, nil
}
