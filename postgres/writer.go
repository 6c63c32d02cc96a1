package postgres

import (
	"context"
	"errors"
	"hash/fnv"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/runevents"
)

const (
	// maxGroupEvents bounds the events a committer gathers into one
	// transaction (a larger PutBatch is still written whole).
	maxGroupEvents = 4096
	// queueLength is the number of writes that may wait for a committer
	// before Put blocks.
	queueLength = 1024
	// writeTimeout bounds one group transaction. The committer does not use
	// the callers' contexts: one caller giving up must not fail the others.
	writeTimeout = 30 * time.Second
)

// advanceCounter ends the counter CTE of the append statements: the
// thread's counter row, created or advanced by the rows appended, is
// locked until commit and its new last seq returned.
const advanceCounter = `ON CONFLICT (thread_id) DO UPDATE SET last_seq = run_event_threads.last_seq + EXCLUDED.last_seq
	RETURNING last_seq`

// insertArrayRows is the inserted CTE of appendRows and
// appendRowsIfOwner: the rows given column by column as the arrays $3 to
// $12, inserted into thread $1 with the seqs that follow counter's last
// seq less their number ($2), in array order.
const insertArrayRows = `INSERT INTO run_events (thread_id, run_id, seq, user_id, event_type, category,
		content, metadata, task_id, caller_middleware, created_at, created_at_offset)
	SELECT $1, r.run_id, counter.last_seq - $2 + r.n, r.user_id, r.event_type, r.category,
		r.content, r.metadata, r.task_id, r.caller_middleware, r.created_at, r.created_at_offset
	FROM counter, unnest($3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[],
		$9::bytea[], $10::boolean[], $11::timestamptz[], $12::integer[])
		WITH ORDINALITY AS r(run_id, user_id, event_type, category, content, metadata,
			task_id, caller_middleware, created_at, created_at_offset, n)`

// appendRows appends rows to one thread in one statement: it adds their
// number ($2) to the thread's counter, taking the counter row's lock until
// commit (so writers of a thread, in any process, commit in seq order),
// inserts the rows, given column by column as arrays, with the seqs that
// follow in array order, notifies ThreadNotifyChannel of the thread's new
// last seq (delivered on commit only), followed by its origin tag ($13:
// "" or the committer's, see notifyOrigin), and returns the first of
// them.
const appendRows = `WITH counter AS (
	INSERT INTO run_event_threads (thread_id, last_seq) VALUES ($1, $2)
	` + advanceCounter + `
), inserted AS (
	` + insertArrayRows + `
), notified AS (
	SELECT pg_notify('` + ThreadNotifyChannel + `', $1 || ':' || last_seq || $13::text) FROM counter
)
SELECT last_seq - $2 + 1 FROM counter, notified`

// appendOwnedRows is appendRows for a thread of which some rows must only
// be appended if the thread's first row, as of the statement's snapshot,
// is their owner's ($12, NULL for rows without the condition; the other
// arrays are appendRows' $3 to $12, numbered from $2; $13 is the
// notification's origin tag, as appendRows'): the rows
// that fail are left out, the counter advances by the rows kept, and the
// first seq is returned with the owner of the first row (NULL: the thread
// had no rows), from which the caller tells which rows were kept. When no
// row is kept, the statement writes nothing (no counter row is created or
// locked, nothing is notified) and the first seq is 0. It always returns
// exactly one row: notified is an aggregate (one row, evaluating pg_notify
// for each counter row), referenced so that it is run.
const appendOwnedRows = `WITH first AS (
	SELECT COALESCE(user_id, '') AS user_id FROM run_events WHERE thread_id = $1 ORDER BY seq ASC LIMIT 1
), kept AS (
	SELECT r.*, row_number() OVER (ORDER BY r.n) AS k
	FROM unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[],
		$8::bytea[], $9::boolean[], $10::timestamptz[], $11::integer[], $12::text[])
		WITH ORDINALITY AS r(run_id, user_id, event_type, category, content, metadata,
			task_id, caller_middleware, created_at, created_at_offset, owner, n)
	WHERE r.owner IS NULL OR r.owner = (SELECT user_id FROM first)
), size AS (
	SELECT count(*) AS rows FROM kept
), counter AS (
	INSERT INTO run_event_threads (thread_id, last_seq) SELECT $1, rows FROM size WHERE rows > 0
	` + advanceCounter + `
), inserted AS (
	INSERT INTO run_events (thread_id, run_id, seq, user_id, event_type, category,
		content, metadata, task_id, caller_middleware, created_at, created_at_offset)
	SELECT $1, k.run_id, counter.last_seq - size.rows + k.k, k.user_id, k.event_type, k.category,
		k.content, k.metadata, k.task_id, k.caller_middleware, k.created_at, k.created_at_offset
	FROM counter, size, kept AS k
), notified AS (
	SELECT count(pg_notify('` + ThreadNotifyChannel + `', $1 || ':' || last_seq || $13::text)) AS n FROM counter
)
SELECT COALESCE((SELECT last_seq FROM counter) - size.rows + 1, 0), (SELECT user_id FROM first)
FROM size, notified`

// appendRowsIfOwner is appendRows for rows that must all only be appended
// if the thread's first row, as of the statement's snapshot, is one
// owner's ($13): all of them are, or none ($14 is the notification's
// origin tag, as appendRows' $13). It returns what
// appendOwnedRows returns, so its caller tells the same way which rows
// were kept. It is what appendOwnedRows does when every row has the same
// owner (PutBatchOwned's usual group: the requests of one user), without
// its window and materialized rows: each row is read from the arrays
// once, as in appendRows.
const appendRowsIfOwner = `WITH first AS (
	SELECT COALESCE(user_id, '') AS user_id FROM run_events WHERE thread_id = $1 ORDER BY seq ASC LIMIT 1
), counter AS (
	INSERT INTO run_event_threads (thread_id, last_seq) SELECT $1, $2 WHERE (SELECT user_id FROM first) = $13
	` + advanceCounter + `
), inserted AS (
	` + insertArrayRows + `
), notified AS (
	SELECT count(pg_notify('` + ThreadNotifyChannel + `', $1 || ':' || last_seq || $14::text)) AS n FROM counter
)
SELECT COALESCE((SELECT last_seq FROM counter) - $2 + 1, 0), (SELECT user_id FROM first) FROM notified`

// writeRequest is one Put or PutBatch waiting for its committer: prepared
// records of one thread, whose Seq the committer fills in.
type writeRequest struct {
	ctx  context.Context
	recs []runevents.Record
	done chan error // buffered: the committer never waits for the caller
	// owner, when not empty, is the user whose the thread's first row must
	// be (PutBatchOwned); the committer sets refused when it is not, and
	// then writes none of recs.
	owner   string
	refused bool
}

// committer writes the requests of its queue, gathering those that wait
// into one transaction: one commit (one WAL flush) for many writers.
type committer struct {
	pool *pgxpool.Pool
	// origin is the store's notifyOrigin tag, which the committer's
	// notifications carry when the group commit hook publishes what it
	// commits.
	origin  string
	timeout time.Duration // of one group transaction
	queue   chan *writeRequest
	stopped chan struct{}
	// onCommit, when set, is told the number of requests of each group
	// committed.
	onCommit func(requests int)
	// groupCommit, when not nil, is handed the records of each
	// transaction committed (RunEventStore.OnGroupCommit).
	groupCommit *runevents.GroupCommitHook
}

func newCommitter(pool *pgxpool.Pool, origin string, onCommit func(int), groupCommit *runevents.GroupCommitHook) *committer {
	c := &committer{pool: pool, origin: origin, timeout: writeTimeout, onCommit: onCommit, groupCommit: groupCommit,
		queue: make(chan *writeRequest, queueLength), stopped: make(chan struct{})}
	go c.run()
	return c
}

// run commits groups until the queue is closed and drained.
func (c *committer) run() {
	defer close(c.stopped)
	for first := range c.queue {
		group := []*writeRequest{first}
		n := len(first.recs)
	gather:
		for n < maxGroupEvents {
			select {
			case r, ok := <-c.queue:
				if !ok {
					break gather
				}
				group = append(group, r)
				n += len(r.recs)
			default:
				break gather
			}
		}
		c.commit(group)
	}
}

// commit writes group in one transaction and answers every request. If the
// server refused the transaction (it rolled back), each request is retried
// alone, so that a request cannot fail the others and every caller gets its
// own answer. Other failures (a lost connection, a timeout) leave the
// outcome unknown: the group may have committed, so retrying could store it
// twice, and every request gets the error instead.
func (c *committer) commit(group []*writeRequest) {
	live := group[:0]
	for _, r := range group {
		if err := r.ctx.Err(); err != nil {
			r.done <- cancelled(err)
			continue
		}
		live = append(live, r)
	}
	if len(live) == 0 {
		return
	}
	// The hook is read once for the group, so that what the writes'
	// notifications say (publish) and what is published agree.
	var publish func(recs []runevents.Record)
	if c.groupCommit != nil {
		publish = c.groupCommit.Func()
	}
	tag := untagged
	if publish != nil {
		tag = notifyOrigin(c.origin)
	}
	err := c.write(live, tag)
	if err == nil || len(live) == 1 || !rolledBack(err) {
		c.answer(live, err, publish)
		return
	}
	for _, r := range live {
		c.answer([]*writeRequest{r}, c.write([]*writeRequest{r}, tag), publish)
	}
}

// answer answers reqs, written in one transaction, with err, and when it
// is nil tells onCommit and publish (the group commit hook, nil when none)
// of them: publish once the callers are answered, so that their goroutines
// are ready to run before the work it starts (the followers the thread log
// wakes).
func (c *committer) answer(reqs []*writeRequest, err error, publish func([]runevents.Record)) {
	if err == nil && c.onCommit != nil {
		c.onCommit(len(reqs))
	}
	for _, r := range reqs {
		r.done <- err
	}
	if err == nil && publish != nil {
		published(reqs, publish)
	}
}

// published hands the records of reqs, just committed in one transaction,
// to f.
func published(reqs []*writeRequest, f func([]runevents.Record)) {
	var recs []runevents.Record
	for _, r := range reqs {
		if !r.refused {
			recs = append(recs, r.recs...)
		}
	}
	if len(recs) > 0 {
		f(recs)
	}
}

// write appends the requests' records in one transaction, assigning seqs
// in queue order. It sends one statement per thread (columns.queue), in
// thread id order (the same in every process, so that two group
// transactions cannot deadlock), in one pipeline: one round trip, and one
// implicit transaction that commits at the pipeline's end, all statements
// or none. Its notifications end with tag: untagged, or the store's origin
// when the group commit hook will hand the records over (notifyOrigin).
func (c *committer) write(reqs []*writeRequest, tag string) error {
	byThread := map[string]*columns{}
	for _, r := range reqs {
		r.refused = false // set afresh: a request may be written again alone
		t := r.recs[0].ThreadID
		if byThread[t] == nil {
			byThread[t] = &columns{}
		}
		for i := range r.recs {
			byThread[t].addOwned(&r.recs[i], r.owner)
		}
	}
	threads := make([]string, 0, len(byThread))
	for t := range byThread {
		threads = append(threads, t)
	}
	slices.Sort(threads)

	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	b := &pgx.Batch{}
	for _, t := range threads {
		byThread[t].queue(b, t, tag)
	}
	br := c.pool.SendBatch(ctx, b)
	next := make(map[string]int64, len(threads))
	firstOwner := make(map[string]*string, len(threads)) // of the threads with owned rows
	for _, t := range threads {
		var first int64
		var owner *string // NULL: the thread had no rows
		dest := []any{&first}
		if byThread[t].owned {
			dest = append(dest, &owner)
		}
		if err := br.QueryRow().Scan(dest...); err != nil {
			br.Close()
			return dbError(err, "put events")
		}
		next[t], firstOwner[t] = first, owner
	}
	// Close reads the end of the pipeline: the commit's outcome.
	if err := br.Close(); err != nil {
		return dbError(err, "put events")
	}
	for _, r := range reqs {
		t := r.recs[0].ThreadID
		if r.owner != "" {
			if first := firstOwner[t]; first == nil || *first != r.owner {
				r.refused = true // its statement left its rows out
				continue
			}
		}
		for i := range r.recs {
			r.recs[i].Seq = next[t]
			next[t]++
		}
	}
	return nil
}

// columns holds records of one thread column by column, the form
// appendRows takes.
type columns struct {
	run, eventType, category, content, metadata []string
	user                                        []*string
	taskID                                      [][]byte
	callerMiddleware                            []bool
	createdAt                                   []time.Time
	offset                                      []int32
	// owner holds each row's required first owner (nil: none), for
	// appendOwnedRows; owned tells whether any row has one, and
	// mixedOwners whether two rows differ in it (one without one counts).
	owner       []*string
	owned       bool
	mixedOwners bool
}

func (c *columns) add(r *runevents.Record) { c.addOwned(r, "") }

// addOwned is add of a row that must only be appended if the thread's
// first row is owner's ("": no condition).
func (c *columns) addOwned(r *runevents.Record, owner string) {
	var required *string
	if owner != "" {
		required, c.owned = &owner, true
	}
	if n := len(c.owner); n > 0 && !sameOwner(c.owner[n-1], required) {
		c.mixedOwners = true
	}
	c.owner = append(c.owner, required)
	c.run = append(c.run, r.RunID)
	var user *string // NULL: an internal writer
	if r.UserID != "" {
		user = &r.UserID
	}
	c.user = append(c.user, user)
	c.eventType = append(c.eventType, string(r.EventType))
	c.category = append(c.category, string(r.Category))
	c.content = append(c.content, string(r.Content))
	c.metadata = append(c.metadata, string(r.Metadata))
	f := runevents.FiltersOf(r.Metadata)
	var task []byte // NULL unless metadata.task_id is a string
	if f.HasTaskID {
		task = []byte(f.TaskID)
	}
	c.taskID = append(c.taskID, task)
	c.callerMiddleware = append(c.callerMiddleware, f.Middleware)
	c.createdAt = append(c.createdAt, r.CreatedAt)
	_, off := r.CreatedAt.Zone()
	c.offset = append(c.offset, int32(off))
}

// sameOwner reports whether two rows' required owners are the same (nil:
// none).
func sameOwner(a, b *string) bool {
	return a == nil && b == nil || a != nil && b != nil && *a == *b
}

// args returns the arguments of appendRows for thread.
func (c *columns) args(thread string) []any {
	return []any{thread, int64(len(c.run)), c.run, c.user, c.eventType, c.category,
		c.content, c.metadata, c.taskID, c.callerMiddleware, c.createdAt, c.offset}
}

// ownedArgs returns the arguments of appendOwnedRows for thread.
func (c *columns) ownedArgs(thread string) []any {
	return []any{thread, c.run, c.user, c.eventType, c.category,
		c.content, c.metadata, c.taskID, c.callerMiddleware, c.createdAt, c.offset, c.owner}
}

// queue queues on b the statement that appends c's rows to thread, whose
// notification carries the origin tag ("" or notifyOrigin's):
// appendRows when no row has an owner (it answers with the first seq),
// appendRowsIfOwner when every row has the same one, appendOwnedRows
// otherwise (both answer with the first seq and the thread's first
// owner).
func (c *columns) queue(b *pgx.Batch, thread, tag string) {
	switch {
	case !c.owned:
		b.Queue(appendRows, append(c.args(thread), tag)...)
	case !c.mixedOwners:
		b.Queue(appendRowsIfOwner, append(c.args(thread), *c.owner[0], tag)...)
	default:
		b.Queue(appendOwnedRows, append(c.ownedArgs(thread), tag)...)
	}
}

// rolledBack reports whether a failed write certainly stored nothing: the
// server reported an error, which aborts the transaction, or the request
// never reached it.
func rolledBack(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) || pgconn.SafeToRetry(err)
}

// shard picks the committer of a thread, so that a thread's writes are
// queued, and committed, in the order they arrive.
func shard(threadID string, n int) int {
	h := fnv.New32a()
	h.Write([]byte(threadID))
	return int(h.Sum32() % uint32(n))
}

// checkStorable refuses text PostgreSQL cannot hold: invalid UTF-8 and NUL
// bytes. The JSON texts cannot hold a raw NUL, so only their UTF-8 is
// checked. index < 0 means a single event.
func checkStorable(r runevents.Record, index int) error {
	field := ""
	switch {
	case !storableText(r.UserID):
		field = "user_id"
	case !storableText(string(r.EventType)):
		field = "event_type"
	case !storableText(string(r.Category)):
		field = "category"
	case !utf8.Valid(r.Content):
		field = "content"
	case !utf8.Valid(r.Metadata):
		field = "metadata"
	default:
		return nil
	}
	if index >= 0 {
		return runstream.Errorf(runstream.CodeInvalidArgument, "events[%d]: %s must be valid UTF-8 without NUL characters", index, field).WithDetail("index", index)
	}
	return runstream.Errorf(runstream.CodeInvalidArgument, "%s must be valid UTF-8 without NUL characters", field)
}

// checkStorableBatch is checkStorable of each record of a batch, with
// its index; it returns the first refusal.
func checkStorableBatch(recs []runevents.Record) error {
	for i, r := range recs {
		if err := checkStorable(r, i); err != nil {
			return err
		}
	}
	return nil
}

func storableText(s string) bool {
	return utf8.ValidString(s) && !strings.ContainsRune(s, 0)
}

// cancelled reports a caller whose context ended before its write was
// acknowledged. The write may still have been committed.
func cancelled(err error) *runstream.Error {
	return runstream.Wrap(err, runstream.CodeUnavailable, "postgres: put events: cancelled before the write was acknowledged")
}
