package postgres

import (
	"bytes"
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/runevents"
)

// IdempotencyTTL is how long an idempotency key is remembered: a completed
// response from its Complete, a reservation from its Begin. A key older
// than that counts as absent, so a retry after it is a new request, and a
// reservation left by a process that died before Complete or Abort blocks
// its key (with CodeConflict) for at most that long.
const IdempotencyTTL = 24 * time.Hour

const (
	// maxIdempotencyKeyLength bounds an idempotency key.
	maxIdempotencyKeyLength = 255
	// sweepBatch bounds how many expired keys one Begin deletes. Each Begin
	// adds at most one key, so the sweep keeps up.
	sweepBatch = 100
	// beginAttempts bounds the rounds of Begin (see there).
	beginAttempts = 3
)

// IdempotencyStore is the runevents.IdempotencyStore of a DB (table
// idempotency_keys of migrations/0003_queue_threads.sql). It is safe for
// concurrent use, by any number of processes sharing the database.
//
// Begin reserves a key with INSERT … ON CONFLICT DO NOTHING: the primary
// key (user_id, key) makes exactly one of concurrent Begins on a key, in
// any process, insert the row; the others wait for its transaction and
// then read the row it committed. Complete and Abort are compare-and-set
// statements on a reserved row. Keys expire after IdempotencyTTL; each
// Begin deletes up to sweepBatch expired keys.
type IdempotencyStore struct {
	pool *pgxpool.Pool
}

var _ runevents.IdempotencyStore = (*IdempotencyStore)(nil)

// Idempotency returns the idempotency-key store of db. Every call returns
// the same store.
func (db *DB) Idempotency() *IdempotencyStore { return db.idempotency }

// checkIdempotencyKey accepts 1 to 255 printable ASCII characters (space to
// tilde), and a user id PostgreSQL can hold.
func checkIdempotencyKey(userID, key string) error {
	if len(key) == 0 || len(key) > maxIdempotencyKeyLength {
		return runstream.Errorf(runstream.CodeInvalidArgument, "idempotency key must have 1 to %d characters", maxIdempotencyKeyLength)
	}
	for i := 0; i < len(key); i++ {
		if key[i] < ' ' || key[i] > '~' {
			return runstream.Errorf(runstream.CodeInvalidArgument, "idempotency key must be printable ASCII")
		}
	}
	return checkText("idempotency user", userID)
}

// The statements of one round of Begin, sent in one pipeline (one round
// trip, one implicit transaction): forget the key if it expired, sweep
// other expired keys (skipping rows other transactions hold, so that the
// sweep never waits), reserve the key unless present, and read it. Under
// READ COMMITTED the read is a statement of its own, with a snapshot taken
// after the insert: it sees the row a concurrent Begin committed.
const (
	expireKeySQL = `DELETE FROM idempotency_keys WHERE user_id = $1 AND key = $2 AND expires_at <= $3`
	sweepKeysSQL = `DELETE FROM idempotency_keys WHERE ctid = ANY (ARRAY (
		SELECT ctid FROM idempotency_keys WHERE expires_at <= $1 ORDER BY expires_at LIMIT $2 FOR UPDATE SKIP LOCKED))`
	reserveKeySQL = `INSERT INTO idempotency_keys (user_id, key, request_hash, expires_at)
		VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING`
	readKeySQL = `SELECT request_hash, status, body, completed_at FROM idempotency_keys WHERE user_id = $1 AND key = $2`
)

// Begin reserves (userID, key) or returns its completed response (see
// runevents.IdempotencyStore).
//
// The row a round finds taken may be gone by the time it is read (its
// reservation aborted or expired in between); Begin then starts another
// round, up to beginAttempts, and after that answers CodeConflict as if
// the key were still in use. A completed response reads back with its
// status, body and CreatedAt (UTC, microseconds).
func (s *IdempotencyStore) Begin(ctx context.Context, userID, key string, requestHash []byte) (*runevents.IdempotentResponse, error) {
	if err := checkIdempotencyKey(userID, key); err != nil {
		return nil, err
	}
	if len(requestHash) == 0 {
		return nil, runstream.Errorf(runstream.CodeInvalidArgument, "idempotency request hash is empty")
	}
	for range beginAttempts {
		k, err := s.beginRound(ctx, userID, key, requestHash)
		switch {
		case err != nil:
			return nil, dbError(err, "idempotency begin")
		case k.reserved:
			return nil, nil
		case !k.found: // gone between the insert and the read
			continue
		case !bytes.Equal(k.resp.RequestHash, requestHash):
			return nil, runstream.Errorf(runstream.CodeValidationFailed, "idempotency key was used for a different request")
		case !k.completed:
			return nil, errKeyInProgress()
		}
		return &k.resp, nil
	}
	return nil, errKeyInProgress()
}

func errKeyInProgress() error {
	return runstream.Errorf(runstream.CodeConflict, "a request with this idempotency key is in progress")
}

// keyState is what one round of Begin found.
type keyState struct {
	reserved  bool // this round inserted the row
	lookedUp  bool // AppendIdempotent read the row after its insert was refused
	found     bool // the row exists (reserved, or another's)
	completed bool // the row holds a response, resp
	resp      runevents.IdempotentResponse
}

// beginRound runs the statements of Begin once.
func (s *IdempotencyStore) beginRound(ctx context.Context, userID, key string, requestHash []byte) (keyState, error) {
	now := storeNow()
	b := &pgx.Batch{}
	b.Queue(expireKeySQL, userID, key, now)
	b.Queue(sweepKeysSQL, now, sweepBatch)
	b.Queue(reserveKeySQL, userID, key, requestHash, now.Add(IdempotencyTTL))
	b.Queue(readKeySQL, userID, key)
	br := s.pool.SendBatch(ctx, b)
	defer br.Close()
	var k keyState
	for range 2 {
		if _, err := br.Exec(); err != nil {
			return k, err
		}
	}
	tag, err := br.Exec()
	if err != nil {
		return k, err
	}
	var (
		status    *int32
		completed *time.Time
	)
	err = br.QueryRow().Scan(&k.resp.RequestHash, &status, &k.resp.Body, &completed)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
	case err != nil:
		return k, err
	default:
		k.found = true
	}
	// Close reads the end of the pipeline: the commit's outcome.
	if err := br.Close(); err != nil {
		return keyState{}, err
	}
	k.reserved = tag.RowsAffected() == 1
	if k.found && status != nil {
		k.completed = true
		k.resp.Status, k.resp.CreatedAt = int(*status), completed.UTC()
	}
	return k, nil
}

// completeKeySQL stores the response of a reserved key.
const completeKeySQL = `UPDATE idempotency_keys SET status = $3, body = $4, completed_at = $5, expires_at = $6
	WHERE user_id = $1 AND key = $2 AND status IS NULL`

// Complete stores the response of a reserved key and remembers it for
// IdempotencyTTL from now. resp.RequestHash is ignored (the reservation's
// is kept); a zero CreatedAt is now. A key that is not reserved is
// CodeConflict.
func (s *IdempotencyStore) Complete(ctx context.Context, userID, key string, resp runevents.IdempotentResponse) error {
	if err := checkIdempotencyKey(userID, key); err != nil {
		return err
	}
	now := storeNow()
	body := resp.Body
	if body == nil {
		body = []byte{} // NULL marks a reservation
	}
	tag, err := s.pool.Exec(ctx, completeKeySQL, userID, key, resp.Status, body,
		orNow(resp.CreatedAt, now).UTC(), now.Add(IdempotencyTTL))
	if err != nil {
		return dbError(err, "idempotency complete")
	}
	if tag.RowsAffected() == 0 {
		return runstream.Errorf(runstream.CodeConflict, "idempotency key is not reserved")
	}
	return nil
}

// Abort releases a reservation so that the key can be used again. A
// completed or unknown key is left as it is, without error.
func (s *IdempotencyStore) Abort(ctx context.Context, userID, key string) error {
	if err := checkIdempotencyKey(userID, key); err != nil {
		return err
	}
	if _, err := s.pool.Exec(ctx, `DELETE FROM idempotency_keys WHERE user_id = $1 AND key = $2 AND status IS NULL`,
		userID, key); err != nil {
		return dbError(err, "idempotency abort")
	}
	return nil
}
