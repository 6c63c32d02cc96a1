package postgres

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/runstream/runstream/runevents"
)

// recordColumns are the columns scanRecords reads, in its order.
const recordColumns = `thread_id, run_id, seq, user_id, event_type, category, content, metadata, created_at, created_at_offset`

// isMessage selects message rows. It is a literal, not an argument, so that
// the planner can use the partial index of messages in generic plans too.
const isMessage = "category = '" + string(runevents.CategoryMessage) + "'"

// query builds a statement over run_events from conditions and their
// arguments; "?" in a condition stands for its argument.
type query struct {
	where []string
	args  []any
}

func (q *query) add(cond string, arg any) {
	q.args = append(q.args, arg)
	q.where = append(q.where, strings.Replace(cond, "?", "$"+strconv.Itoa(len(q.args)), 1))
}

// arg adds an argument that is not part of a condition and returns its
// placeholder.
func (q *query) arg(v any) string {
	q.args = append(q.args, v)
	return "$" + strconv.Itoa(len(q.args))
}

// owner restricts q to rows visible to o. It returns false when no row can
// be visible: a user id PostgreSQL cannot store was never written.
func (q *query) owner(o runevents.Owner) bool {
	if o.All() {
		return true
	}
	if !storableText(o.UserID()) {
		return false
	}
	q.add("user_id = ?", o.UserID())
	return true
}

// cursors adds the exclusive seq bounds that are set.
func (q *query) cursors(after, before *int64) {
	if after != nil {
		q.add("seq > ?", *after)
	}
	if before != nil {
		q.add("seq < ?", *before)
	}
}

func (q *query) whereClause() string { return " WHERE " + strings.Join(q.where, " AND ") }

// page returns the statement selecting the first limit rows of q in seq
// order, or the last limit rows in descending order.
func (q *query) page(descending bool, limit int) string {
	order := " ORDER BY seq"
	if descending {
		order = " ORDER BY seq DESC"
	}
	return "SELECT " + recordColumns + " FROM run_events" + q.whereClause() + order + " LIMIT " + q.arg(limit)
}

// ListMessages returns message rows of the thread (see runevents.Store).
func (s *RunEventStore) ListMessages(ctx context.Context, p runevents.ListMessagesParams) ([]runevents.Record, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	sql, args, desc, ok := listMessagesQuery(p.ThreadID, "", p.Owner, p.AfterSeq, p.BeforeSeq, p.Limit)
	if !ok {
		return nil, nil
	}
	return s.list(ctx, "list messages", sql, args, desc)
}

// ListMessagesByRun returns message rows of one run (see runevents.Store).
func (s *RunEventStore) ListMessagesByRun(ctx context.Context, p runevents.ListMessagesByRunParams) ([]runevents.Record, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	sql, args, desc, ok := listMessagesQuery(p.ThreadID, p.RunID, p.Owner, p.AfterSeq, p.BeforeSeq, p.Limit)
	if !ok {
		return nil, nil
	}
	return s.list(ctx, "list messages by run", sql, args, desc)
}

// listMessagesQuery returns the statement of ListMessages (run "") or
// ListMessagesByRun, whether it selects in descending order, and ok=false
// when no row can match. It selects the window's first rows after a
// cursor, else its last rows.
func listMessagesQuery(thread, run string, owner runevents.Owner, after, before *int64, limit int) (sql string, args []any, descending, ok bool) {
	var q query
	q.add("thread_id = ?", thread)
	if run != "" {
		q.add("run_id = ?", run)
	}
	q.where = append(q.where, isMessage)
	if !q.owner(owner) {
		return "", nil, false, false
	}
	q.cursors(after, before)
	descending = after == nil
	return q.page(descending, limit), q.args, descending, true
}

// ListEvents returns rows of one run (see runevents.Store). The event type
// and task filters run in SQL before the limit; the task filter uses the
// task_id column the writer derived from metadata.
func (s *RunEventStore) ListEvents(ctx context.Context, p runevents.ListEventsParams) ([]runevents.Record, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	sql, args, ok := listEventsQuery(p)
	if !ok {
		return nil, nil
	}
	return s.list(ctx, "list events", sql, args, false)
}

// listEventsQuery returns the statement of ListEvents, or ok=false when no
// row can match.
func listEventsQuery(p runevents.ListEventsParams) (sql string, args []any, ok bool) {
	var q query
	q.add("thread_id = ?", p.ThreadID)
	q.add("run_id = ?", p.RunID)
	if len(p.EventTypes) > 0 {
		// A type PostgreSQL cannot store was never written.
		var types []string
		for _, t := range p.EventTypes {
			if storableText(string(t)) {
				types = append(types, string(t))
			}
		}
		if len(types) == 0 {
			return "", nil, false
		}
		q.add("event_type = ANY(?)", types)
	}
	if p.FiltersTask() {
		q.add("task_id = ?", []byte(p.TaskID))
	}
	if !q.owner(p.Owner) {
		return "", nil, false
	}
	q.cursors(p.AfterSeq, nil)
	return q.page(false, p.Limit), q.args, true
}

// LastVisibleAISeqByRun returns the last visible AI message seq of each
// requested run (see runevents.Store). The caller test uses the
// caller_middleware column the writer derived from metadata.
func (s *RunEventStore) LastVisibleAISeqByRun(ctx context.Context, p runevents.LastVisibleAIParams) (map[string]int64, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	out := map[string]int64{}
	if len(p.RunIDs) == 0 {
		return out, nil
	}
	var q query
	q.add("thread_id = ?", p.ThreadID)
	q.add("run_id = ANY(?)", p.RunIDs)
	q.where = append(q.where, isMessage)
	q.add("event_type = ANY(?)", []string{string(runevents.EventLLMAIResponse), string(runevents.EventLegacyAIMessage)})
	q.where = append(q.where, "NOT caller_middleware")
	if !q.owner(p.Owner) {
		return out, nil
	}
	if err := s.checkOpen(); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, "SELECT run_id, max(seq) FROM run_events"+q.whereClause()+" GROUP BY run_id", q.args...)
	if err != nil {
		return nil, dbError(err, "last visible AI seq by run")
	}
	defer rows.Close()
	for rows.Next() {
		var run string
		var seq int64
		if err := rows.Scan(&run, &seq); err != nil {
			return nil, dbError(err, "last visible AI seq by run")
		}
		out[run] = seq
	}
	if err := rows.Err(); err != nil {
		return nil, dbError(err, "last visible AI seq by run")
	}
	return out, nil
}

// CountMessages returns the number of message rows of the thread visible
// to owner.
func (s *RunEventStore) CountMessages(ctx context.Context, threadID string, owner runevents.Owner) (int, error) {
	if err := firstError(runevents.ValidateID("thread_id", threadID), runevents.CheckOwner(owner)); err != nil {
		return 0, err
	}
	var q query
	q.add("thread_id = ?", threadID)
	q.where = append(q.where, isMessage)
	if !q.owner(owner) {
		return 0, nil
	}
	if err := s.checkOpen(); err != nil {
		return 0, err
	}
	var n int
	if err := s.pool.QueryRow(ctx, "SELECT count(*) FROM run_events"+q.whereClause(), q.args...).Scan(&n); err != nil {
		return 0, dbError(err, "count messages")
	}
	return n, nil
}

// DeleteByThread deletes the thread's rows visible to owner. The thread's
// counter row stays, so seqs are not reused.
func (s *RunEventStore) DeleteByThread(ctx context.Context, threadID string, owner runevents.Owner) (int, error) {
	if err := firstError(runevents.ValidateID("thread_id", threadID), runevents.CheckOwner(owner)); err != nil {
		return 0, err
	}
	var q query
	q.add("thread_id = ?", threadID)
	return s.delete(ctx, "delete by thread", q, owner)
}

// DeleteByRun deletes the run's rows visible to owner. Seqs are not reused.
func (s *RunEventStore) DeleteByRun(ctx context.Context, threadID, runID string, owner runevents.Owner) (int, error) {
	if err := firstError(runevents.ValidateID("thread_id", threadID), runevents.ValidateID("run_id", runID), runevents.CheckOwner(owner)); err != nil {
		return 0, err
	}
	var q query
	q.add("thread_id = ?", threadID)
	q.add("run_id = ?", runID)
	return s.delete(ctx, "delete by run", q, owner)
}

func (s *RunEventStore) delete(ctx context.Context, op string, q query, owner runevents.Owner) (int, error) {
	if !q.owner(owner) {
		return 0, nil
	}
	if err := s.checkOpen(); err != nil {
		return 0, err
	}
	tag, err := s.pool.Exec(ctx, "DELETE FROM run_events"+q.whereClause(), q.args...)
	if err != nil {
		return 0, dbError(err, op)
	}
	return int(tag.RowsAffected()), nil
}

// list runs a page query; rows selected in descending order are returned
// ascending.
func (s *RunEventStore) list(ctx context.Context, op, sql string, args []any, descending bool) ([]runevents.Record, error) {
	if err := s.checkOpen(); err != nil {
		return nil, err
	}
	recs, err := queryPage(ctx, s.pool, sql, args, scanRecords)
	if err != nil {
		return nil, dbError(err, op)
	}
	if descending {
		slices.Reverse(recs)
	}
	return recs, nil
}

// queryPage runs a page query with sorting disabled. Every page query has
// an index in its order; but a planner that underestimates a thread
// (statistics missing, or a large thread outside the most common values)
// would fetch all the thread's matching rows and sort them to keep a few,
// turning a sub-millisecond page into a scan of the thread.
//
// The setting is local to the transaction, and a pipeline (one Sync) is one
// implicit transaction, so it costs no round trip and ends with the query.
func queryPage[T any](ctx context.Context, pool *pgxpool.Pool, sql string, args []any, scan func(pgx.Rows) (T, error)) (T, error) {
	return queryAfter(ctx, pool, "SELECT set_config('enable_sort', 'off', true)", sql, args, scan)
}

// queryAfter sends first, a statement without arguments, and then sql in
// one pipeline (one Sync: one implicit transaction, one round trip), and
// returns what scan reads of sql's rows. What first sets up (a local
// setting, a transaction-scoped lock) holds while sql runs and ends with
// it.
func queryAfter[T any](ctx context.Context, pool *pgxpool.Pool, first, sql string, args []any, scan func(pgx.Rows) (T, error)) (T, error) {
	var zero T
	b := &pgx.Batch{}
	b.Queue(first)
	b.Queue(sql, args...)
	br := pool.SendBatch(ctx, b)
	defer br.Close()
	if _, err := br.Exec(); err != nil {
		return zero, err
	}
	rows, err := br.Query()
	if err != nil {
		return zero, err
	}
	out, err := scan(rows)
	if err != nil {
		return zero, err
	}
	return out, br.Close()
}

// scanRecords reads rows of recordColumns and closes rows. CreatedAt comes
// back in the writer's offset: UTC for offset 0, else a fixed zone.
func scanRecords(rows pgx.Rows) ([]runevents.Record, error) {
	defer rows.Close()
	var out []runevents.Record
	for rows.Next() {
		// Plain types scan without reflection: a page is hundreds of rows.
		var (
			r                   runevents.Record
			user                *string
			eventType, category string
			content, metadata   []byte
			created             time.Time
			offset              int32
		)
		if err := rows.Scan(&r.ThreadID, &r.RunID, &r.Seq, &user, &eventType, &category,
			&content, &metadata, &created, &offset); err != nil {
			return nil, err
		}
		if user != nil {
			r.UserID = *user
		}
		r.EventType, r.Category = runevents.EventType(eventType), runevents.Category(category)
		r.Content, r.Metadata = content, metadata
		if offset == 0 {
			r.CreatedAt = created.UTC()
		} else {
			r.CreatedAt = created.In(time.FixedZone("", int(offset)))
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

func firstError(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
