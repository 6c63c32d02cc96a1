package memory

import (
	"bytes"
	"context"
	"sync"
	"time"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/runevents"
)

// IdempotencyTTL is how long the memory IdempotencyStore remembers a
// completed response. A retry after that is treated as a new request.
const IdempotencyTTL = 24 * time.Hour

// maxIdempotencyKeyLength bounds an idempotency key.
const maxIdempotencyKeyLength = 255

// IdempotencyStore is the in-memory runevents.IdempotencyStore. The zero
// value is not usable; call NewIdempotencyStore.
//
// Completed responses are forgotten IdempotencyTTL after they were
// stored; expired entries are swept at most once a minute, on Begin. A
// reservation lasts until Complete or Abort.
type IdempotencyStore struct {
	cfg config

	mu        sync.Mutex
	entries   map[idemKey]*idemEntry
	lastSweep time.Time
}

var _ runevents.IdempotencyStore = (*IdempotencyStore)(nil)

type idemKey struct{ user, key string }

type idemEntry struct {
	hash []byte
	// resp is nil while the key is reserved.
	resp    *runevents.IdempotentResponse
	expires time.Time
}

// NewIdempotencyStore returns an empty store. Of the options only
// WithClock applies: it drives expiry.
func NewIdempotencyStore(opts ...Option) *IdempotencyStore {
	cfg := config{now: time.Now}
	for _, o := range opts {
		o(&cfg)
	}
	return &IdempotencyStore{cfg: cfg, entries: map[idemKey]*idemEntry{}}
}

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

// Begin reserves (userID, key) or returns the completed response.
func (s *IdempotencyStore) Begin(_ context.Context, userID, key string, requestHash []byte) (*runevents.IdempotentResponse, error) {
	if err := checkIdempotencyKey(key); err != nil {
		return nil, err
	}
	if len(requestHash) == 0 {
		return nil, runstream.Errorf(runstream.CodeInvalidArgument, "idempotency request hash is empty")
	}
	now := s.cfg.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if now.Sub(s.lastSweep) >= time.Minute {
		s.sweepLocked(now)
	}
	k := idemKey{userID, key}
	e := s.entries[k]
	if e != nil && e.resp != nil && !now.Before(e.expires) {
		delete(s.entries, k)
		e = nil
	}
	if e == nil {
		s.entries[k] = &idemEntry{hash: bytes.Clone(requestHash)}
		return nil, nil
	}
	if !bytes.Equal(e.hash, requestHash) {
		return nil, runstream.Errorf(runstream.CodeValidationFailed, "idempotency key was used for a different request")
	}
	if e.resp == nil {
		return nil, runstream.Errorf(runstream.CodeConflict, "a request with this idempotency key is in progress")
	}
	return cloneResponse(e.resp), nil
}

// Complete stores the response of a reserved key.
func (s *IdempotencyStore) Complete(_ context.Context, userID, key string, resp runevents.IdempotentResponse) error {
	now := s.cfg.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.entries[idemKey{userID, key}]
	if e == nil || e.resp != nil {
		return runstream.Errorf(runstream.CodeConflict, "idempotency key is not reserved")
	}
	resp.RequestHash = e.hash
	if resp.CreatedAt.IsZero() {
		resp.CreatedAt = now
	}
	e.resp = cloneResponse(&resp)
	e.expires = now.Add(IdempotencyTTL)
	return nil
}

// Abort releases a reservation; a completed key stays.
func (s *IdempotencyStore) Abort(_ context.Context, userID, key string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := idemKey{userID, key}
	if e := s.entries[k]; e != nil && e.resp == nil {
		delete(s.entries, k)
	}
	return nil
}

func (s *IdempotencyStore) sweepLocked(now time.Time) {
	s.lastSweep = now
	for k, e := range s.entries {
		if e.resp != nil && !now.Before(e.expires) {
			delete(s.entries, k)
		}
	}
}

func cloneResponse(r *runevents.IdempotentResponse) *runevents.IdempotentResponse {
	c := *r
	c.RequestHash = bytes.Clone(r.RequestHash)
	c.Body = bytes.Clone(r.Body)
	return &c
}
