package postgres

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/workflow"
)

// Append appends p.Events to a run, with its artifacts, resume token and
// node outputs, all or nothing, through the run's group committer: the
// append may share its transaction with others, and is refused alone
// (CodeWorkflowRunNotFound, CodeConflict) without failing them.
func (s *WorkflowStore) Append(ctx context.Context, p workflow.AppendParams) ([]workflow.Envelope, error) {
	if err := checkAppend(p); err != nil {
		return nil, err
	}
	if !lookupable(p.RunID) {
		if err := s.checkOpen(); err != nil {
			return nil, err
		}
		return nil, workflow.RunNotFound(p.RunID)
	}
	req := &appendRequest{ctx: ctx, p: p, done: make(chan error, 1)}
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return nil, errWorkflowsClosed()
	}
	c := s.committers[shard(p.RunID, len(s.committers))]
	select {
	case c.queue <- req:
	case <-ctx.Done():
		s.mu.RUnlock()
		return nil, appendCancelled(ctx.Err())
	}
	s.mu.RUnlock()
	select {
	case err := <-req.done:
		if err != nil {
			return nil, err
		}
		return req.envs, nil
	case <-ctx.Done():
		return nil, appendCancelled(ctx.Err())
	}
}

// appendCancelled reports a caller whose context ended before its append
// was acknowledged. The append may still have been committed.
func appendCancelled(err error) *runstream.Error {
	return runstream.Wrap(err, runstream.CodeUnavailable, "postgres: append: cancelled before the append was acknowledged")
}

// checkAppend rejects arguments that are wrong whatever the run's state:
// those of workflow.AppendParams.Validate, and text PostgreSQL cannot hold.
func checkAppend(p workflow.AppendParams) error {
	if err := p.Validate(); err != nil {
		return err
	}
	if err := storableEvents(p.Events); err != nil {
		return err
	}
	if err := storableNodeOutputs(p.NodeOutputs); err != nil {
		return err
	}
	if t := p.ResumeToken; t != nil {
		texts := append([]string{t.NodeID, t.NodeRunID, string(t.FormSchema)}, t.Actions...)
		if !allStorable(texts) {
			return runstream.Errorf(runstream.CodeInvalidArgument, "append: resume token text must be valid UTF-8 without NUL characters")
		}
	}
	for i, a := range p.Artifacts {
		if !allStorable([]string{a.ID, a.NodeID, a.Name, a.MimeType, a.SHA256}) {
			return runstream.Errorf(runstream.CodeInvalidArgument, "append: artifacts[%d]: text must be valid UTF-8 without NUL characters", i)
		}
	}
	return nil
}

func allStorable(texts []string) bool {
	for _, s := range texts {
		if !storableText(s) {
			return false
		}
	}
	return true
}

// appendRequest is one Append waiting for its committer.
type appendRequest struct {
	ctx context.Context
	p   workflow.AppendParams
	// envs are the stored envelopes, set before done receives nil.
	envs []workflow.Envelope
	done chan error // buffered: the committer never waits for the caller
}

// Group commit of appends.
const (
	// maxAppendGroupEvents bounds the events a committer gathers into one
	// transaction (a larger batch is still written whole).
	maxAppendGroupEvents = 4096
	// appendQueueLength is the number of appends that may wait for a
	// committer before Append blocks.
	appendQueueLength = 1024
	// appendTimeout bounds one group transaction. The committer does not
	// use the callers' contexts: one caller giving up must not fail the
	// others.
	appendTimeout = 30 * time.Second
)

// appendCommitter commits the appends of its queue, gathering those that
// wait into one transaction: one commit (one WAL flush, one lock of each
// run row) for many appenders.
type appendCommitter struct {
	pool    *pgxpool.Pool
	timeout time.Duration // of one group transaction
	queue   chan *appendRequest
	stopped chan struct{}
	// onCommit, when set, is told the number of requests of each group
	// committed.
	onCommit func(requests int)
}

func newAppendCommitter(pool *pgxpool.Pool, onCommit func(int)) *appendCommitter {
	c := &appendCommitter{pool: pool, timeout: appendTimeout, onCommit: onCommit,
		queue: make(chan *appendRequest, appendQueueLength), stopped: make(chan struct{})}
	go c.run()
	return c
}

// run commits groups until the queue is closed and drained.
func (c *appendCommitter) run() {
	defer close(c.stopped)
	for first := range c.queue {
		group := []*appendRequest{first}
		n := len(first.p.Events)
	gather:
		for n < maxAppendGroupEvents {
			select {
			case r, ok := <-c.queue:
				if !ok {
					break gather
				}
				group = append(group, r)
				n += len(r.p.Events)
			default:
				break gather
			}
		}
		c.commit(group)
	}
}

// commit writes group in one transaction and answers every request. If the
// transaction surely did not commit, each request is retried alone, so
// that a request cannot fail the others. If its outcome is unknown (the
// connection was lost or timed out while committing), the group may have
// committed and a retry could append it twice: every request gets the
// error instead.
func (c *appendCommitter) commit(group []*appendRequest) {
	live := group[:0]
	for _, r := range group {
		if err := r.ctx.Err(); err != nil {
			r.done <- appendCancelled(err)
			continue
		}
		live = append(live, r)
	}
	if len(live) == 0 {
		return
	}
	refusals, retry, err := c.write(live)
	switch {
	case err == nil:
		if c.onCommit != nil {
			c.onCommit(len(live))
		}
		for i, r := range live {
			r.done <- refusals[i]
		}
	case len(live) == 1 || !retry:
		for _, r := range live {
			r.done <- err
		}
	default:
		for _, r := range live {
			refusals, _, err := c.write([]*appendRequest{r})
			if err == nil {
				err = refusals[0]
			}
			r.done <- err
		}
	}
}

// write appends the requests in one transaction, in queue order, and
// returns each request's refusal (nil for those written). err is the
// transaction's failure, which refuses them all; retry then reports that
// the transaction surely did not commit.
func (c *appendCommitter) write(reqs []*appendRequest) (refusals []error, retry bool, err error) {
	ids := make([]string, 0, len(reqs))
	for _, r := range reqs {
		ids = append(ids, r.p.RunID)
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)

	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	conn, err := c.pool.Acquire(ctx)
	if err != nil {
		return nil, true, dbError(err, "append")
	}
	defer conn.Release()
	refusals, committing, err := writeAppends(ctx, conn.Conn(), reqs, ids)
	if err == nil {
		return refusals, true, nil
	}
	endFailedTx(conn.Conn(), err)
	// A server error aborts the whole transaction, COMMIT included.
	var pgErr *pgconn.PgError
	if !committing || errors.As(err, &pgErr) || pgconn.SafeToRetry(err) {
		return nil, true, dbError(err, "append")
	}
	return nil, false, dbError(err, "append: outcome unknown")
}

// writeAppends runs the transaction of a group in two round trips: BEGIN
// with the reads that lock the runs, then the writes with COMMIT.
// committing reports that the second round trip, which commits, was
// started.
func writeAppends(ctx context.Context, conn *pgx.Conn, reqs []*appendRequest, ids []string) (refusals []error, committing bool, err error) {
	artifactRuns, artifactIDs := artifactKeys(reqs)
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	b.Queue(lockRunsSQL, ids)
	if len(artifactIDs) > 0 {
		b.Queue(takenArtifactsSQL, artifactRuns, artifactIDs)
	}
	br := conn.SendBatch(ctx, b)
	runs, taken, err := readLocks(br, len(artifactIDs) > 0)
	if err := errors.Join(err, br.Close()); err != nil {
		return nil, false, err
	}
	t := storeNow()
	var w runWrites
	outputs := nodeOutputs{}
	refusals = make([]error, len(reqs))
	for i, r := range reqs {
		if refusals[i] = w.add(runs[r.p.RunID], r, taken, t); refusals[i] == nil {
			outputs.add(r.p.RunID, r.p.NodeOutputs)
		}
	}
	b = &pgx.Batch{}
	w.queue(b)
	outputs.queue(b)
	b.Queue("COMMIT")
	if err := conn.SendBatch(ctx, b).Close(); err != nil {
		return nil, true, err
	}
	return refusals, true, nil
}

// readLocks reads the results of the first round trip of writeAppends.
func readLocks(br pgx.BatchResults, withArtifacts bool) (map[string]*workflow.Run, map[artifactKey]bool, error) {
	if _, err := br.Exec(); err != nil {
		return nil, nil, err
	}
	rows, err := br.Query()
	if err != nil {
		return nil, nil, err
	}
	runs, err := collectRuns(rows)
	if err != nil || !withArtifacts {
		return runs, map[artifactKey]bool{}, err
	}
	rows, err = br.Query()
	if err != nil {
		return nil, nil, err
	}
	taken, err := collectTaken(rows)
	return runs, taken, err
}

// endFailedTx ends the transaction a failed write may have left open.
// After a server error the connection is in step and is rolled back; after
// any other error (a timeout, a lost connection) it may be cut in the
// middle of a pipeline, so it is closed. The pool drops a connection that
// is closed or still in a transaction when it is released.
func endFailedTx(conn *pgx.Conn, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	var pgErr *pgconn.PgError
	switch {
	case conn.IsClosed():
	case !errors.As(err, &pgErr):
		conn.Close(ctx)
	case conn.PgConn().TxStatus() != 'I':
		conn.Exec(ctx, "ROLLBACK")
	}
}

// artifactKey names an artifact: ids are unique per run.
type artifactKey struct{ run, id string }

// artifactKeys returns the run ids and ids of the artifacts the requests
// add, as takenArtifactsSQL takes them.
func artifactKeys(reqs []*appendRequest) (runIDs, ids []string) {
	for _, r := range reqs {
		for _, a := range r.p.Artifacts {
			runIDs, ids = append(runIDs, r.p.RunID), append(ids, a.ID)
		}
	}
	return runIDs, ids
}

// takenArtifactsSQL selects the stored artifacts among those given.
const takenArtifactsSQL = `SELECT a.run_id, a.id FROM workflow_artifacts a
	JOIN unnest($1::text[], $2::text[]) AS n (run_id, id) ON a.run_id = n.run_id AND a.id = n.id`

func collectTaken(rows pgx.Rows) (map[artifactKey]bool, error) {
	keys, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (artifactKey, error) {
		var k artifactKey
		err := row.Scan(&k.run, &k.id)
		return k, err
	})
	taken := make(map[artifactKey]bool, len(keys))
	for _, k := range keys {
		taken[k] = true
	}
	return taken, err
}

// add checks r against its run (run is nil when missing) as the
// transaction left it so far, and adds its writes; it returns r's refusal
// without adding anything when the run does not accept it.
func (w *runWrites) add(run *workflow.Run, r *appendRequest, taken map[artifactKey]bool, now time.Time) error {
	p := r.p
	if run == nil {
		return workflow.RunNotFound(p.RunID)
	}
	if err := p.Accepts(*run); err != nil {
		return err
	}
	for _, a := range p.Artifacts {
		if taken[artifactKey{p.RunID, a.ID}] {
			return runstream.Errorf(runstream.CodeConflict, "append: run %q has an artifact %q", p.RunID, a.ID)
		}
	}
	for _, a := range p.Artifacts {
		a.RunID = p.RunID
		a.CreatedAt = orNow(a.CreatedAt, now)
		taken[artifactKey{p.RunID, a.ID}] = true
		w.artifacts = append(w.artifacts, a)
	}
	if t := p.ResumeToken; t != nil {
		tok := *t
		tok.RunID, tok.ConsumedAt = p.RunID, time.Time{}
		tok.ExpiresAt = tok.ExpiresAt.Truncate(time.Microsecond)
		w.setToken(tok)
	}
	r.envs = w.apply(run, p.Events, now)
	return nil
}
