package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"time"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/runevents"
)

// IdempotencyTTL is how long an idempotency key is remembered: a completed
// response from its Complete, a reservation from its Begin. A key older
// than that counts as absent, so a retry after it is a new request, and a
// reservation left by a process that died before Complete or Abort blocks
// its key (with CodeConflict) for at most that long.
const IdempotencyTTL = 24 * time.Hour

// maxIdempotencyKeyLength bounds an idempotency key.
const maxIdempotencyKeyLength = 255

// sweepBatch bounds how many expired keys one Begin deletes, so that the
// first Begin after a long pause does not hold the write lock for long.
// Each Begin adds at most one key, so the sweep keeps up.
const sweepBatch = 100

// IdempotencyStore is the runevents.IdempotencyStore of a DB (table
// idempotency_keys of migrations/0003_threads.sql).
//
// Begin, Complete and Abort each run in one transaction of the DB's
// group-commit loop, which holds the file's write lock (BEGIN IMMEDIATE):
// Begin's insert-if-absent and its read-back are therefore atomic against
// every other Begin on the file, in this process or another, and exactly
// one of concurrent Begins on a key gets the reservation. Keys expire
// after IdempotencyTTL; each Begin deletes up to sweepBatch expired keys.
type IdempotencyStore struct {
	db *DB
}

var _ runevents.IdempotencyStore = (*IdempotencyStore)(nil)

func newIdempotencyStore(db *DB) *IdempotencyStore { return &IdempotencyStore{db: db} }

// Idempotency key states, in column state.
const (
	keyReserved  = "reserved"
	keyCompleted = "completed"
)

// checkIdempotencyKey accepts 1 to 255 printable ASCII characters (space
// to tilde).
func checkIdempotencyKey(key string) error {
	if len(key) == 0 || len(key) > maxIdempotencyKeyLength {
		return runstream.Errorf(runstream.CodeInvalidArgument, "idempotency key must have 1 to %d characters", maxIdempotencyKeyLength)
	}
	for i := 0; i < len(key); i++ {
		if key[i] < ' ' || key[i] > '~' {
			return runstream.Errorf(runstream.CodeInvalidArgument, "idempotency key must be printable ASCII")
		}
	}
	return nil
}

// The statements of Begin, in the order it runs them: forget the key when
// it expired, sweep other expired keys, reserve the key unless present,
// read it back.
const (
	expireKeySQL = `DELETE FROM idempotency_keys WHERE user_id = ? AND key = ? AND created_at <= ?`
	sweepKeysSQL = `DELETE FROM idempotency_keys WHERE rowid IN
		(SELECT rowid FROM idempotency_keys WHERE created_at <= ? ORDER BY created_at LIMIT ?)`
	reserveKeySQL = `INSERT INTO idempotency_keys (user_id, key, request_hash, state, status, body, created_at)
		VALUES (?, ?, ?, '` + keyReserved + `', 0, x'', ?) ON CONFLICT DO NOTHING`
	readKeySQL = `SELECT request_hash, state, status, body, created_at FROM idempotency_keys WHERE user_id = ? AND key = ?`
)

// Begin reserves (userID, key) or returns its completed response.
func (s *IdempotencyStore) Begin(ctx context.Context, userID, key string, requestHash []byte) (*runevents.IdempotentResponse, error) {
	if err := firstError(checkDBOpen(s.db), checkIdempotencyKey(key)); err != nil {
		return nil, err
	}
	if len(requestHash) == 0 {
		return nil, runstream.Errorf(runstream.CodeInvalidArgument, "idempotency request hash is empty")
	}
	now := storeNow()
	expired := micros(now.Add(-IdempotencyTTL))
	var (
		reserved bool
		state    string
		resp     runevents.IdempotentResponse
	)
	err := s.db.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		const op = "sqlite: idempotency begin"
		reserved, state, resp = false, "", runevents.IdempotentResponse{}
		if _, err := tx.ExecContext(ctx, expireKeySQL, userID, key, expired); err != nil {
			return sqlError(op, err)
		}
		if _, err := tx.ExecContext(ctx, sweepKeysSQL, expired, sweepBatch); err != nil {
			return sqlError(op, err)
		}
		res, err := tx.ExecContext(ctx, reserveKeySQL, userID, key, requestHash, micros(now))
		if err != nil {
			return sqlError(op, err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return sqlError(op, err)
		}
		if reserved = n == 1; reserved {
			return nil
		}
		var created int64
		if err := tx.QueryRowContext(ctx, readKeySQL, userID, key).Scan(&resp.RequestHash, &state, &resp.Status, &resp.Body, &created); err != nil {
			return sqlError(op, err)
		}
		resp.CreatedAt = fromMicros(created)
		return nil
	})
	switch {
	case err != nil:
		return nil, err
	case reserved:
		return nil, nil
	case !bytes.Equal(resp.RequestHash, requestHash):
		return nil, runstream.Errorf(runstream.CodeValidationFailed, "idempotency key was used for a different request")
	case state == keyReserved:
		return nil, runstream.Errorf(runstream.CodeConflict, "a request with this idempotency key is in progress")
	}
	return &resp, nil
}

// completeKeySQL stores the response of a reserved key.
const completeKeySQL = `UPDATE idempotency_keys SET state = '` + keyCompleted + `', status = ?, body = ?, created_at = ?
	WHERE user_id = ? AND key = ? AND state = '` + keyReserved + `'`

// Complete stores the response of a reserved key; resp.RequestHash is
// ignored (the reservation's is kept) and a zero CreatedAt is now. A key
// that is not reserved is CodeConflict.
func (s *IdempotencyStore) Complete(ctx context.Context, userID, key string, resp runevents.IdempotentResponse) error {
	if err := firstError(checkDBOpen(s.db), checkIdempotencyKey(key)); err != nil {
		return err
	}
	created := orNow(resp.CreatedAt, storeNow())
	body := resp.Body
	if body == nil {
		body = []byte{} // the column is NOT NULL
	}
	var done bool
	err := s.db.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, completeKeySQL, resp.Status, body, micros(created), userID, key)
		if err != nil {
			return sqlError("sqlite: idempotency complete", err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return sqlError("sqlite: idempotency complete", err)
		}
		done = n == 1
		return nil
	})
	if err != nil {
		return err
	}
	if !done {
		return runstream.Errorf(runstream.CodeConflict, "idempotency key is not reserved")
	}
	return nil
}

// abortKeySQL releases a reservation; a completed key stays.
const abortKeySQL = `DELETE FROM idempotency_keys WHERE user_id = ? AND key = ? AND state = '` + keyReserved + `'`

// Abort releases a reservation so that the key can be used again. A
// completed or unknown key is left as it is, without error.
func (s *IdempotencyStore) Abort(ctx context.Context, userID, key string) error {
	if err := firstError(checkDBOpen(s.db), checkIdempotencyKey(key)); err != nil {
		return err
	}
	return s.db.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, abortKeySQL, userID, key); err != nil {
			return sqlError("sqlite: idempotency abort", err)
		}
		return nil
	})
}
