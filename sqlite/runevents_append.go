package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"math/bits"
	"time"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/runevents"
)

// Appends are deferred to the end of their group transaction: each Put or
// PutBatch of a group only records its rows (appendOp), and flushAppends,
// run before the commit, bumps each thread's counter once for all of the
// group's rows of that thread and inserts every row with multi-row
// statements. Concurrent Puts then cost the writer little more per event
// than one PutBatch does. Seqs follow the order of the requests in the
// group; an op that must see the appended rows (PutIfAbsent,
// AppendIdempotent, ImportThread, deletes) flushes first.

// pendingAppend is the rows of one Put or PutBatch, awaiting the flush of
// its group transaction.
type pendingAppend struct {
	recs []runevents.Record // prepared; the flush sets their Seq
	args []any              // rowArgs(recs); the flush sets their seq
	// owner, when not empty, is the user whose the thread's first row
	// must be (PutBatchOwned); the flush sets refused when it is not.
	owner   string
	refused bool
}

// Put appends e and returns the stored record.
func (s *RunEventStore) Put(ctx context.Context, e runevents.NewEvent) (runevents.Record, error) {
	if err := s.checkOpen(); err != nil {
		return runevents.Record{}, err
	}
	rec, err := runevents.Prepare(e, time.Now(), s.maxTrace)
	if err != nil {
		return runevents.Record{}, err
	}
	recs, err := s.append(ctx, &pendingAppend{recs: []runevents.Record{rec}, args: rowArgs([]runevents.Record{rec})})
	if err != nil {
		return runevents.Record{}, err
	}
	return recs[0], nil
}

// PutBatch appends events of one thread atomically with consecutive seqs.
func (s *RunEventStore) PutBatch(ctx context.Context, events []runevents.NewEvent) ([]runevents.Record, error) {
	return s.putBatch(ctx, "", events)
}

// PutBatchOwned is PutBatch when the thread's first row is userID's,
// checked by the write loop in the group transaction (one read per
// thread and group, on the writer's connection); otherwise it writes
// nothing and returns runevents.ErrNotFirstOwner. Rows appended by
// earlier writes of the same group count only when they were flushed
// before this call's ops ran: by an op run between them (PutIfAbsent,
// AppendIdempotent, ImportThread and deletes flush the group's deferred
// appends first), or at the end of the round of the group before the one
// this call joined (DB.runTx); rows still deferred do not, so a thread
// they create answers ErrNotFirstOwner.
func (s *RunEventStore) PutBatchOwned(ctx context.Context, userID string, events []runevents.NewEvent) ([]runevents.Record, error) {
	if userID == "" {
		return nil, runstream.Errorf(runstream.CodeInvalidArgument, "sqlite: put run events: an owner is required")
	}
	return s.putBatch(ctx, userID, events)
}

// putBatch is PutBatch, or PutBatchOwned when owner is not empty.
func (s *RunEventStore) putBatch(ctx context.Context, owner string, events []runevents.NewEvent) ([]runevents.Record, error) {
	if err := s.checkOpen(); err != nil {
		return nil, err
	}
	recs, err := runevents.PrepareBatch(events, time.Now(), s.maxTrace)
	if err != nil || len(recs) == 0 {
		return recs, err
	}
	return s.append(ctx, &pendingAppend{recs: recs, args: rowArgs(recs), owner: owner})
}

// append writes p's prepared records of one thread in a group
// transaction and returns them with their seqs.
func (s *RunEventStore) append(ctx context.Context, p *pendingAppend) ([]runevents.Record, error) {
	err := s.db.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		if s.pendingTx != tx { // the first append of this transaction
			s.pendingTx, s.pending = tx, nil
		}
		s.pending = append(s.pending, p)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if p.refused {
		return nil, runevents.ErrNotFirstOwner
	}
	return p.recs, nil
}

// flushAppends writes the appends tx has deferred. It runs in the write
// loop, before the commit (registered in DB.beforeCommit) and before any
// op that reads or deletes run events.
func (s *RunEventStore) flushAppends(ctx context.Context, tx *sql.Tx) error {
	if s.pendingTx != tx || len(s.pending) == 0 {
		return nil
	}
	pending, err := s.checkOwners(ctx, tx, s.pending)
	s.pending = nil
	if err != nil || len(pending) == 0 {
		return err
	}

	// One counter bump per thread, in order of first appearance.
	var threads []string
	counts := map[string]int64{}
	for _, p := range pending {
		thread := p.recs[0].ThreadID
		if counts[thread] == 0 {
			threads = append(threads, thread)
		}
		counts[thread] += int64(len(p.recs))
	}
	next := make(map[string]int64, len(threads))
	for _, thread := range threads {
		last, err := s.reserveSeqs(ctx, tx, thread, counts[thread])
		if err != nil {
			return err
		}
		next[thread] = last - counts[thread] + 1
	}

	var args []any
	if len(pending) == 1 {
		args = pending[0].args
	} else {
		n := 0
		for _, p := range pending {
			n += len(p.args)
		}
		args = make([]any, 0, n)
	}
	for _, p := range pending {
		thread := p.recs[0].ThreadID
		for i := range p.recs {
			p.recs[i].Seq = next[thread]
			p.args[i*insertColumns+seqColumn] = next[thread]
			next[thread]++
		}
		if len(pending) > 1 {
			args = append(args, p.args...)
		}
	}
	if err := s.insertArgs(ctx, tx, args); err != nil {
		return err
	}
	if s.flushedTx != tx {
		clear(s.flushed[:cap(s.flushed)]) // a rolled-back transaction's
		s.flushedTx, s.flushed = tx, s.flushed[:0]
	}
	s.flushed = append(s.flushed, pending...)
	return nil
}

// checkOwners marks refused the appends of pending whose thread's first
// row is not their owner's, reading it once per thread, and returns the
// others. An append may be checked again (its group rolled back and
// retried it alone), so each check sets refused afresh.
func (s *RunEventStore) checkOwners(ctx context.Context, tx *sql.Tx, pending []*pendingAppend) ([]*pendingAppend, error) {
	type firstOwner struct {
		user  string
		found bool
	}
	var owners map[string]firstOwner // by thread
	kept := pending[:0]
	for _, p := range pending {
		p.refused = false
		if p.owner == "" {
			kept = append(kept, p)
			continue
		}
		thread := p.recs[0].ThreadID
		o, ok := owners[thread]
		if !ok {
			err := tx.StmtContext(ctx, s.firstOwner).QueryRowContext(ctx, thread).Scan(&o.user)
			switch {
			case err == nil:
				o.found = true
			case !errors.Is(err, sql.ErrNoRows):
				return nil, sqlError("sqlite: put run events: first thread owner", err)
			}
			if owners == nil {
				owners = map[string]firstOwner{}
			}
			owners[thread] = o
		}
		if !o.found || o.user != p.owner {
			p.refused = true
			continue
		}
		kept = append(kept, p)
	}
	return kept, nil
}

// reserveSeqs advances thread's counter by n and returns the last seq
// reserved: the caller owns last-n+1 … last.
func (s *RunEventStore) reserveSeqs(ctx context.Context, tx *sql.Tx, thread string, n int64) (last int64, err error) {
	if err := tx.StmtContext(ctx, s.bumpSeq).QueryRowContext(ctx, thread, n).Scan(&last); err != nil {
		return 0, sqlError("sqlite: put run events: reserve seqs", err)
	}
	return last, nil
}

// insertArgs inserts rows given as rowArgs, seqs set, in chunks of the
// prepared multi-row statements.
func (s *RunEventStore) insertArgs(ctx context.Context, tx *sql.Tx, args []any) error {
	rows := len(args) / insertColumns
	for done := 0; done < rows; {
		k := min(bits.Len(uint(rows-done)), insertSizes) - 1 // the largest chunk that fits
		chunk := 1 << k
		if _, err := tx.StmtContext(ctx, s.inserts[k]).ExecContext(ctx, args[done*insertColumns:(done+chunk)*insertColumns]...); err != nil {
			return sqlError("sqlite: put run events: insert", err)
		}
		done += chunk
	}
	return nil
}

// insertColumns is the number of arguments per row of the insert
// statements; seqColumn is the index of seq among them.
const (
	insertColumns = 11
	seqColumn     = 9
)

// rowArgs returns the insert arguments of recs, row after row, seq left to
// be set. It runs in the caller's goroutine, so that the write loop only
// executes SQL. The rows of a batch usually share their thread, run, user,
// event type, category and time: a row equal to the previous one in such a
// column shares its argument (one conversion to a string and to any per
// distinct value, not per row).
func rowArgs(recs []runevents.Record) []any {
	args := make([]any, 0, len(recs)*insertColumns)
	var prev []any // the previous row's arguments
	var prevCreatedAt time.Time
	for i, r := range recs {
		var taskID any // NULL unless metadata.task_id is a string
		f := runevents.FiltersOf(r.Metadata)
		if f.HasTaskID {
			taskID = f.TaskID
		}
		middleware := 0
		if f.Middleware {
			middleware = 1
		}
		var createdAt any
		if i > 0 && r.CreatedAt == prevCreatedAt {
			createdAt = prev[createdAtColumn]
		} else {
			createdAt = r.CreatedAt.Format(runevents.CreatedAtLayout)
		}
		row := len(args)
		args = append(args, sameString(prev, 0, r.ThreadID), sameString(prev, 1, r.RunID), sameString(prev, 2, r.UserID),
			sameString(prev, 3, string(r.EventType)), sameString(prev, 4, string(r.Category)),
			string(r.Content), string(r.Metadata), taskID, middleware, nil,
			createdAt)
		prev = args[row:]
		prevCreatedAt = r.CreatedAt
	}
	return args
}

// createdAtColumn is the index of created_at among a row's arguments.
const createdAtColumn = 10

// sameString returns the previous row's argument at column col when it is
// the string v, and v otherwise.
func sameString(prev []any, col int, v string) any {
	if prev != nil {
		if p, ok := prev[col].(string); ok && p == v {
			return prev[col]
		}
	}
	return v
}
