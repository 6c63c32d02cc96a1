package threadsvc

import (
	"context"
	"errors"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/runevents"
)

// MaxIdempotencyKey bounds an idempotency key.
const MaxIdempotencyKey = 255

// Response is a request's answer as an idempotency key remembers it.
type Response struct {
	Status int
	Body   []byte
}

// IdempotentParams is an append made under an idempotency key.
type IdempotentParams struct {
	User     string
	ThreadID string
	Key      string
	// Hash identifies the request (its method, target and body): a retry
	// under the key must have the same.
	Hash []byte
	// Events is the batch; with IfAbsent it holds exactly one event, the
	// singleton write.
	Events   []runevents.NewEvent
	IfAbsent bool
	// Response builds the answer stored with the key from the records as
	// stored (for IfAbsent, the record created or found and whether it was
	// created). It runs inside the store's transaction, perhaps more than
	// once: it must be quick and free of side effects.
	Response func(recs []runevents.Record, created bool) (Response, error)
}

// Replay returns the response stored under the user's key when the key
// holds one for a request with hash, or nil. It lets a retry be answered
// before checks that might now refuse it (a thread since deleted, say);
// AppendIdempotent still decides. A key used for another request is
// VALIDATION_FAILED; a key held by a request in progress UNAVAILABLE.
func (s *Service) Replay(ctx context.Context, user, key string, hash []byte) (*Response, error) {
	if err := s.checkKey(key); err != nil {
		return nil, err
	}
	first, err := s.log.LookupIdempotent(ctx, user, key, hash)
	if err != nil || first == nil {
		return nil, err
	}
	return &Response{Status: first.Status, Body: first.Body}, nil
}

// AppendIdempotent appends p's batch under p's key unless the thread is
// another user's. The key, the rows and the response commit in one
// transaction of the store (runevents.IdempotentAppender), so a retry
// with the same key and hash gets the first response again (replayed
// true), whatever crashed in between, and the batch is applied at most
// once; a key used for another request is VALIDATION_FAILED; a key held by
// a request in progress UNAVAILABLE (retryable). A failed append leaves no
// trace of the key. The append runs to its end even if ctx is cancelled,
// so that its outcome is stored and published.
func (s *Service) AppendIdempotent(ctx context.Context, p IdempotentParams) (resp Response, replayed bool, err error) {
	if err := s.checkKey(p.Key); err != nil {
		return Response{}, false, err
	}
	ctx = context.WithoutCancel(ctx)
	release, err := s.claim(ctx, p.User, p.ThreadID)
	if err != nil {
		return Response{}, false, err
	}
	defer release()
	res, err := s.log.AppendIdempotent(ctx, runevents.IdempotentAppend{
		UserID: p.User, Key: p.Key, RequestHash: p.Hash, Events: p.Events, IfAbsent: p.IfAbsent,
		Response: func(recs []runevents.Record, created bool) (runevents.IdempotentResponse, error) {
			r, err := p.Response(recs, created)
			return runevents.IdempotentResponse{Status: r.Status, Body: r.Body}, err
		},
	})
	if err != nil {
		return Response{}, false, WriteError{err}
	}
	return Response{Status: res.Response.Status, Body: res.Response.Body}, res.Replayed, nil
}

// checkKey refuses an invalid key, and any key on a service without an
// event log.
func (s *Service) checkKey(key string) error {
	if !ValidIdempotencyKey(key) {
		return runstream.Errorf(runstream.CodeValidationFailed, "%s must be one value of 1 to %d printable ASCII characters", "Idempotency-Key", MaxIdempotencyKey).
			WithDetail("parameter", "Idempotency-Key")
	}
	if s.log == nil {
		return unavailable("thread event log")
	}
	return nil
}

// ValidIdempotencyKey reports whether key is 1 to MaxIdempotencyKey
// printable ASCII characters.
func ValidIdempotencyKey(key string) bool {
	if key == "" || len(key) > MaxIdempotencyKey {
		return false
	}
	for i := 0; i < len(key); i++ {
		if key[i] < ' ' || key[i] > '~' {
			return false
		}
	}
	return true
}

// IsWriteError reports whether err is a WriteError.
func IsWriteError(err error) bool { return errors.As(err, new(WriteError)) }
