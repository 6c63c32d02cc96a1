package memory

import (
	"bytes"
	"context"
	"time"

	"github.com/runstream/runstream/runevents"
)

var _ runevents.IdempotentAppender = (*RunEventStore)(nil)

// storedKey is a response the RunEventStore keeps under an idempotency
// key, until expires.
type storedKey struct {
	resp    runevents.IdempotentResponse
	expires time.Time
}

// AppendIdempotent appends a.Events and stores the response under the key
// while holding the store's lock, so that a concurrent call with the same
// key waits and replays (runevents.IdempotentAppender).
func (s *RunEventStore) AppendIdempotent(_ context.Context, a runevents.IdempotentAppend) (runevents.IdempotentResult, error) {
	if err := a.Validate(); err != nil {
		return runevents.IdempotentResult{}, err
	}
	now := s.cfg.now()
	recs, err := runevents.PrepareBatch(a.Events, now, s.cfg.maxTraceContent)
	if err != nil {
		return runevents.IdempotentResult{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return runevents.IdempotentResult{}, errClosed()
	}
	if resp, err := s.lookupLocked(a.UserID, a.Key, a.RequestHash, now); err != nil || resp != nil {
		if err != nil {
			return runevents.IdempotentResult{}, err
		}
		return runevents.IdempotentResult{Response: *resp, Replayed: true}, nil
	}
	var (
		out      []runevents.Record
		appended []runevents.Record
		created  = true
	)
	if a.IfAbsent {
		old, found, err := s.firstOfTypeLocked(recs[0])
		if err != nil {
			return runevents.IdempotentResult{}, err
		}
		if found {
			out, created = []runevents.Record{old}, false
		}
	}
	if created {
		// The response is built before anything is stored, from the seqs
		// the rows will get, so that a failing builder leaves no rows.
		t := s.threads[recs[0].ThreadID]
		next := int64(1)
		if t != nil {
			next = t.lastSeq + 1
		}
		for i := range recs {
			recs[i].Seq = next + int64(i)
		}
		out = recs
	}
	resp, err := a.Response(cloneRecords(out), created)
	if err != nil {
		return runevents.IdempotentResult{}, err
	}
	if created {
		for _, rec := range recs {
			appended = append(appended, s.appendLocked(rec).Clone())
		}
	}
	resp.RequestHash = bytes.Clone(a.RequestHash)
	if resp.CreatedAt.IsZero() {
		resp.CreatedAt = now
	}
	resp.Body = bytes.Clone(resp.Body)
	if s.keys == nil {
		s.keys = map[idemKey]*storedKey{}
	}
	s.keys[idemKey{a.UserID, a.Key}] = &storedKey{resp: resp, expires: now.Add(IdempotencyTTL)}
	return runevents.IdempotentResult{Response: *cloneResponse(&resp), Appended: appended}, nil
}

// LookupIdempotent returns the response stored under the key, or nil.
func (s *RunEventStore) LookupIdempotent(_ context.Context, userID, key string, requestHash []byte) (*runevents.IdempotentResponse, error) {
	if err := runevents.CheckIdempotencyKey(key); err != nil {
		return nil, err
	}
	now := s.cfg.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, errClosed()
	}
	return s.lookupLocked(userID, key, requestHash, now)
}

// lookupLocked returns a copy of the response under the key, nil when the
// key is absent or expired (an expired key is forgotten, and at most once
// a minute every expired key is), or the error of a hash mismatch. The
// caller holds s.mu for writing.
func (s *RunEventStore) lookupLocked(userID, key string, requestHash []byte, now time.Time) (*runevents.IdempotentResponse, error) {
	if now.Sub(s.lastKeySweep) >= time.Minute {
		s.lastKeySweep = now
		for k, e := range s.keys {
			if !now.Before(e.expires) {
				delete(s.keys, k)
			}
		}
	}
	k := idemKey{userID, key}
	e := s.keys[k]
	if e == nil {
		return nil, nil
	}
	if !now.Before(e.expires) {
		delete(s.keys, k)
		return nil, nil
	}
	if !bytes.Equal(e.resp.RequestHash, requestHash) {
		return nil, runevents.ErrIdempotencyMismatch()
	}
	return cloneResponse(&e.resp), nil
}

func cloneRecords(recs []runevents.Record) []runevents.Record {
	out := make([]runevents.Record, len(recs))
	for i, r := range recs {
		out[i] = r.Clone()
	}
	return out
}
