package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/runevents"
)

var _ runevents.IdempotentAppender = (*RunEventStore)(nil)

// insertCompletedKeySQL stores the response of an idempotent append, in
// the append's transaction.
const insertCompletedKeySQL = `INSERT INTO idempotency_keys (user_id, key, request_hash, state, status, body, created_at)
	VALUES (?, ?, ?, '` + keyCompleted + `', ?, ?, ?)`

// keyLookup is what an idempotent append found under its key.
type keyLookup struct {
	found bool
	state string
	resp  runevents.IdempotentResponse
}

// verdict turns a lookup into the caller's answer: the stored response,
// nil for an absent key, or the error of a mismatch or a reservation.
func (k keyLookup) verdict(requestHash []byte) (*runevents.IdempotentResponse, error) {
	switch {
	case !k.found:
		return nil, nil
	case !bytes.Equal(k.resp.RequestHash, requestHash):
		return nil, runevents.ErrIdempotencyMismatch()
	case k.state != keyCompleted:
		return nil, runevents.ErrIdempotencyInProgress()
	}
	resp := k.resp
	return &resp, nil
}

// lookupKey forgets the key when it expired, sweeps other expired keys,
// and reads the key.
func lookupKey(ctx context.Context, tx *sql.Tx, userID, key string, now time.Time) (keyLookup, error) {
	const op = "sqlite: idempotent append: look up the key"
	expired := micros(now.Add(-IdempotencyTTL))
	if _, err := tx.ExecContext(ctx, expireKeySQL, userID, key, expired); err != nil {
		return keyLookup{}, sqlError(op, err)
	}
	if _, err := tx.ExecContext(ctx, sweepKeysSQL, expired, sweepBatch); err != nil {
		return keyLookup{}, sqlError(op, err)
	}
	var (
		k       keyLookup
		created int64
	)
	err := tx.QueryRowContext(ctx, readKeySQL, userID, key).Scan(&k.resp.RequestHash, &k.state, &k.resp.Status, &k.resp.Body, &created)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return keyLookup{}, nil
	case err != nil:
		return keyLookup{}, sqlError(op, err)
	}
	k.found, k.resp.CreatedAt = true, fromMicros(created)
	return k, nil
}

// AppendIdempotent runs the key's lookup, the append and the storing of
// the response as one op of the group-commit loop: they commit together
// or not at all, and ops run one at a time, so a concurrent call with the
// same key (in this process or, through the file's write lock, another)
// sees the first one's response.
func (s *RunEventStore) AppendIdempotent(ctx context.Context, a runevents.IdempotentAppend) (runevents.IdempotentResult, error) {
	if err := firstError(s.checkOpen(), a.Validate()); err != nil {
		return runevents.IdempotentResult{}, err
	}
	now := storeNow()
	recs, err := runevents.PrepareBatch(a.Events, now, s.maxTrace)
	if err != nil {
		return runevents.IdempotentResult{}, err
	}
	args := rowArgs(recs)
	var (
		found    keyLookup
		conflict error
		result   runevents.IdempotentResult
	)
	err = s.db.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		found, conflict, result = keyLookup{}, nil, runevents.IdempotentResult{}
		if err := s.flushAppends(ctx, tx); err != nil { // earlier appends of the group come first
			return err
		}
		k, err := lookupKey(ctx, tx, a.UserID, a.Key, now)
		if err != nil {
			return err
		}
		if k.found {
			found = k
			return nil
		}
		out, created := recs, true
		if a.IfAbsent {
			existing, err := scanRecord(tx.StmtContext(ctx, s.firstOfType).QueryRowContext(ctx, recs[0].ThreadID, recs[0].RunID, string(recs[0].EventType)))
			switch {
			case err == nil && existing.UserID != recs[0].UserID:
				conflict = runstream.Errorf(runstream.CodeConflict,
					"an event of type %q already exists for this run under another owner", recs[0].EventType)
				return nil
			case err == nil:
				out, created = []runevents.Record{existing}, false
			case !errors.Is(err, sql.ErrNoRows):
				return sqlError("sqlite: idempotent append: look up", err)
			}
		}
		if created {
			last, err := s.reserveSeqs(ctx, tx, recs[0].ThreadID, int64(len(recs)))
			if err != nil {
				return err
			}
			for i := range recs {
				recs[i].Seq = last - int64(len(recs)) + 1 + int64(i)
				args[i*insertColumns+seqColumn] = recs[i].Seq
			}
			if err := s.insertArgs(ctx, tx, args); err != nil {
				return err
			}
		}
		resp, err := a.Response(cloneRecords(out), created)
		if err != nil {
			return err
		}
		resp.RequestHash = a.RequestHash
		resp.CreatedAt = orNow(resp.CreatedAt, now)
		body := resp.Body
		if body == nil {
			body = []byte{} // the column is NOT NULL
		}
		if _, err := tx.ExecContext(ctx, insertCompletedKeySQL, a.UserID, a.Key, a.RequestHash, resp.Status, body, micros(resp.CreatedAt)); err != nil {
			return sqlError("sqlite: idempotent append: store the response", err)
		}
		result.Response = resp
		if created {
			result.Appended = recs
		}
		return nil
	})
	switch {
	case err != nil:
		return runevents.IdempotentResult{}, err
	case conflict != nil:
		return runevents.IdempotentResult{}, conflict
	case found.found:
		resp, err := found.verdict(a.RequestHash)
		if err != nil {
			return runevents.IdempotentResult{}, err
		}
		return runevents.IdempotentResult{Response: *resp, Replayed: true}, nil
	}
	return result, nil
}

// LookupIdempotent reads the key from the read pool: an expired key is
// absent.
func (s *RunEventStore) LookupIdempotent(ctx context.Context, userID, key string, requestHash []byte) (*runevents.IdempotentResponse, error) {
	if err := firstError(s.checkOpen(), runevents.CheckIdempotencyKey(key)); err != nil {
		return nil, err
	}
	var (
		k       keyLookup
		created int64
	)
	err := s.db.readers.QueryRowContext(ctx, readKeySQL, userID, key).Scan(&k.resp.RequestHash, &k.state, &k.resp.Status, &k.resp.Body, &created)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil, nil
	case err != nil:
		return nil, sqlError("sqlite: idempotent lookup", err)
	}
	k.found, k.resp.CreatedAt = true, fromMicros(created)
	if !k.resp.CreatedAt.After(storeNow().Add(-IdempotencyTTL)) {
		return nil, nil
	}
	return k.verdict(requestHash)
}

func cloneRecords(recs []runevents.Record) []runevents.Record {
	out := make([]runevents.Record, len(recs))
	for i, r := range recs {
		out[i] = r.Clone()
	}
	return out
}
