package threadsvc

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"

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

// IdempotentParams names the request Idempotent runs under a key.
type IdempotentParams struct {
	User string
	Key  string
	// Hash identifies the request (its method, target and body): a retry
	// under the key must have the same.
	Hash []byte
	// KeepKey reports whether a failure of do leaves the outcome unknown
	// (a WriteError failed on the server's side, say), so that the key
	// stays reserved rather than released.
	KeepKey func(err error) bool
}

// Idempotent runs do once per (user, key): a retry with the same key and
// hash gets the first response again with replayed true, another request
// with the same key VALIDATION_FAILED, and a retry while the first is in
// progress CONFLICT. do runs to its end even if ctx is cancelled, so that
// its outcome is known, and its value is encoded as JSON. A failure of do
// for which p.KeepKey is true keeps the key reserved, answering later
// retries CONFLICT, because the write may have committed: a key never
// applies a write twice. Any other failure releases the key for a retry.
// A key that is not 1 to MaxIdempotencyKey printable ASCII characters is
// VALIDATION_FAILED; a service without an idempotency store answers
// UNAVAILABLE. Failures to release or complete a key are reported to
// logf with their level, the request then going on as described.
func (s *Service) Idempotent(ctx context.Context, p IdempotentParams, do func(ctx context.Context) (int, any, error), logf func(level slog.Level, msg string, err error)) (resp Response, replayed bool, err error) {
	if !ValidIdempotencyKey(p.Key) {
		return Response{}, false, runstream.Errorf(runstream.CodeValidationFailed, "%s must be one value of 1 to %d printable ASCII characters", "Idempotency-Key", MaxIdempotencyKey).
			WithDetail("parameter", "Idempotency-Key")
	}
	if s.idem == nil {
		return Response{}, false, unavailable("idempotency store")
	}
	ctx = context.WithoutCancel(ctx)
	first, err := s.idem.Begin(ctx, p.User, p.Key, p.Hash)
	if err != nil {
		return Response{}, false, err
	}
	if first != nil {
		return Response{Status: first.Status, Body: first.Body}, true, nil
	}
	// The reservation is released when the request is refused, or when do
	// panics before writing; kept otherwise.
	release := true
	defer func() {
		if release {
			if err := s.idem.Abort(ctx, p.User, p.Key); err != nil {
				logf(slog.LevelWarn, "idempotency abort failed", err)
			}
		}
	}()
	status, v, err := do(ctx)
	if err != nil {
		if p.KeepKey(err) {
			release = false
			logf(slog.LevelWarn, "idempotency key kept reserved: the request failed with an unknown outcome", err)
		}
		return Response{}, false, err
	}
	release = false
	out, err := json.Marshal(v)
	if err != nil {
		return Response{}, false, runstream.Wrap(err, runstream.CodeInternal, "encode response")
	}
	if err := s.idem.Complete(ctx, p.User, p.Key,
		runevents.IdempotentResponse{RequestHash: p.Hash, Status: status, Body: out}); err != nil {
		// The write was applied; a retry would apply it again, so the key
		// stays reserved (CONFLICT) rather than released.
		logf(slog.LevelError, "idempotency complete failed", err)
	}
	return Response{Status: status, Body: out}, false, nil
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
