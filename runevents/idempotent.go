package runevents

import (
	"context"

	"github.com/runstream/runstream"
)

// IdempotentAppend is an append made retry-safe by an idempotency key:
// the key, the rows and the response stored under the key commit in one
// transaction, so that after any crash the key either holds the response
// of a committed append or is absent, and its append was not applied.
type IdempotentAppend struct {
	// UserID and Key name the key; keys are per user. Key has 1 to 255
	// printable ASCII characters.
	UserID, Key string
	// RequestHash is the SHA-256 of the request that uses the key; a later
	// request with the same key and another hash is refused.
	RequestHash []byte
	// Events is the batch (one thread), stored as PutBatch stores it. With
	// IfAbsent it holds exactly one event, stored as PutIfAbsent stores it.
	Events   []NewEvent
	IfAbsent bool
	// Response builds the response stored under the key from the records
	// the append returns (for IfAbsent, the record created or found, and
	// whether it was created). It runs inside the store's transaction,
	// perhaps more than once: it must be quick, free of side effects, and
	// must not call the store. An error rolls the append back.
	Response func(recs []Record, created bool) (IdempotentResponse, error)
}

// IdempotentResult is the outcome of an idempotent append.
type IdempotentResult struct {
	// Response is the response stored under the key: the one this call
	// built, or the first request's when Replayed.
	Response IdempotentResponse
	// Replayed reports that the key already held a response: nothing was
	// appended.
	Replayed bool
	// Appended holds the records this call stored, with their seqs, for
	// the caller to publish: empty when Replayed, or when IfAbsent found
	// an existing row.
	Appended []Record
}

// IdempotentAppender is the capability of a Store that appends under an
// idempotency key in one transaction. The memory, sqlite and postgres
// stores have it.
//
// AppendIdempotent looks the key up in the append's transaction: a key
// holding a response with the same request hash returns it (Replayed,
// nothing written); one with another hash fails with
// CodeValidationFailed; a key reserved by IdempotencyStore.Begin (a
// request of the three-step protocol in progress, or one that died) fails
// with ErrIdempotencyInProgress. An absent or expired key gets the append
// and the response, committed together; a failure leaves neither. Two
// concurrent calls with one key never both append: the second waits for
// the first's transaction and replays its response.
//
// LookupIdempotent returns the response stored under the key, or nil when
// the key is absent or expired, with the same errors. It lets a caller
// replay before checks that would now refuse the request; the append
// still decides.
type IdempotentAppender interface {
	AppendIdempotent(ctx context.Context, a IdempotentAppend) (IdempotentResult, error)
	LookupIdempotent(ctx context.Context, userID, key string, requestHash []byte) (*IdempotentResponse, error)
}

// ErrIdempotencyInProgress is the error of a key another request holds.
// It is UNAVAILABLE, so clients retry it after a pause: the request
// holding the key finishes, or its reservation expires.
func ErrIdempotencyInProgress() *runstream.Error {
	return runstream.Errorf(runstream.CodeUnavailable, "a request with this idempotency key is in progress; retry it after a pause").
		WithDetail("reason", "idempotency_key_in_progress")
}

// ErrIdempotencyMismatch is the error of a key used for another request.
func ErrIdempotencyMismatch() *runstream.Error {
	return runstream.Errorf(runstream.CodeValidationFailed, "idempotency key was used for a different request")
}

// Validate checks the fields of a that do not depend on the store: key,
// hash, response builder, and one event when IfAbsent.
func (a IdempotentAppend) Validate() error {
	if err := CheckIdempotencyKey(a.Key); err != nil {
		return err
	}
	switch {
	case len(a.RequestHash) == 0:
		return runstreamInvalid("idempotency request hash is empty")
	case a.Response == nil:
		return runstreamInvalid("idempotent append needs a Response builder")
	case len(a.Events) == 0:
		return runstreamInvalid("idempotent append needs at least one event")
	case a.IfAbsent && len(a.Events) != 1:
		return runstreamInvalid("an idempotent if-absent append takes exactly one event")
	}
	return nil
}

// MaxIdempotencyKeyLength bounds an idempotency key.
const MaxIdempotencyKeyLength = 255

// CheckIdempotencyKey accepts 1 to 255 printable ASCII characters (space
// to tilde).
func CheckIdempotencyKey(key string) error {
	if len(key) == 0 || len(key) > MaxIdempotencyKeyLength {
		return runstreamInvalid("idempotency key must have 1 to 255 characters")
	}
	for i := 0; i < len(key); i++ {
		if key[i] < ' ' || key[i] > '~' {
			return runstreamInvalid("idempotency key must be printable ASCII")
		}
	}
	return nil
}
