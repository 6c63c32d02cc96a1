package runeventstest

import (
	"crypto/sha256"
	"sync"
	"testing"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/runevents"
)

// IdempotencySuite runs the conformance tests of
// runevents.IdempotencyStore against the stores open returns (a new, empty
// store per call, from parallel subtests): reservation, replay of a
// completed response, hash mismatch, the in-progress conflict, abort and
// retry, per-user keys, and 50 concurrent Begins on one key.
func IdempotencySuite(t *testing.T, open func(t *testing.T) runevents.IdempotencyStore) {
	t.Helper()
	for _, tc := range idempotencyTests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := open(t)
			if s == nil {
				t.Fatal("runeventstest: open returned nil")
			}
			tc.run(t, s)
		})
	}
}

func requestHash(body string) []byte {
	h := sha256.Sum256([]byte("POST /x\n" + body))
	return h[:]
}

func begin(t *testing.T, s runevents.IdempotencyStore, user, key string, hash []byte) *runevents.IdempotentResponse {
	t.Helper()
	resp, err := s.Begin(t.Context(), user, key, hash)
	if err != nil {
		t.Fatalf("Begin(%s, %s): %v", user, key, err)
	}
	return resp
}

var idempotencyTests = []struct {
	name string
	run  func(t *testing.T, s runevents.IdempotencyStore)
}{
	{"ReplaysCompleted", func(t *testing.T, s runevents.IdempotencyStore) {
		h := requestHash(`{"a":1}`)
		if resp := begin(t, s, alice, "k1", h); resp != nil {
			t.Fatalf("first Begin returned a response %+v; want a reservation", resp)
		}
		if err := s.Complete(t.Context(), alice, "k1", runevents.IdempotentResponse{RequestHash: h, Status: 201, Body: []byte(`{"events":[]}`)}); err != nil {
			t.Fatal(err)
		}
		for range 2 {
			resp := begin(t, s, alice, "k1", h)
			if resp == nil || resp.Status != 201 || string(resp.Body) != `{"events":[]}` {
				t.Fatalf("Begin after Complete = %+v; want the stored 201 response", resp)
			}
			resp.Body[0] = 'X'
		}
	}},
	{"HashMismatch", func(t *testing.T, s runevents.IdempotencyStore) {
		h := requestHash(`{"a":1}`)
		begin(t, s, alice, "k1", h)
		_, err := s.Begin(t.Context(), alice, "k1", requestHash(`{"a":2}`))
		wantCode(t, err, runstream.CodeValidationFailed, "Begin with another body while reserved")
		if err := s.Complete(t.Context(), alice, "k1", runevents.IdempotentResponse{RequestHash: h, Status: 200, Body: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
		_, err = s.Begin(t.Context(), alice, "k1", requestHash(`{"a":2}`))
		wantCode(t, err, runstream.CodeValidationFailed, "Begin with another body after Complete")
	}},
	{"InProgressConflicts", func(t *testing.T, s runevents.IdempotencyStore) {
		h := requestHash(`{}`)
		begin(t, s, alice, "k1", h)
		resp, err := s.Begin(t.Context(), alice, "k1", h)
		wantCode(t, err, runstream.CodeConflict, "second Begin while the first is in progress")
		if resp != nil {
			t.Errorf("conflicting Begin returned a response %+v", resp)
		}
	}},
	{"AbortAllowsRetry", func(t *testing.T, s runevents.IdempotencyStore) {
		h := requestHash(`{}`)
		begin(t, s, alice, "k1", h)
		if err := s.Abort(t.Context(), alice, "k1"); err != nil {
			t.Fatal(err)
		}
		if resp := begin(t, s, alice, "k1", requestHash(`{"other":true}`)); resp != nil {
			t.Errorf("Begin after Abort = %+v; want a new reservation, even for another body", resp)
		}
		if err := s.Complete(t.Context(), alice, "k1", runevents.IdempotentResponse{Status: 201, Body: []byte(`1`)}); err != nil {
			t.Fatal(err)
		}
		if err := s.Abort(t.Context(), alice, "k1"); err != nil {
			t.Fatalf("Abort of a completed key: %v", err)
		}
		if resp := begin(t, s, alice, "k1", requestHash(`{"other":true}`)); resp == nil || string(resp.Body) != "1" {
			t.Errorf("Begin after aborting a completed key = %+v; want the stored response", resp)
		}
		if err := s.Abort(t.Context(), alice, "never-begun"); err != nil {
			t.Errorf("Abort of an unknown key: %v", err)
		}
	}},
	{"KeysArePerUser", func(t *testing.T, s runevents.IdempotencyStore) {
		h := requestHash(`{}`)
		begin(t, s, alice, "k1", h)
		if resp := begin(t, s, bob, "k1", requestHash(`{"b":1}`)); resp != nil {
			t.Errorf("bob's Begin with alice's key = %+v; want his own reservation", resp)
		}
		if err := s.Complete(t.Context(), bob, "k1", runevents.IdempotentResponse{Status: 200, Body: []byte(`"bob"`)}); err != nil {
			t.Fatal(err)
		}
		_, err := s.Begin(t.Context(), alice, "k1", h)
		wantCode(t, err, runstream.CodeConflict, "alice's key stays reserved")
	}},
	{"CompleteNeedsReservation", func(t *testing.T, s runevents.IdempotencyStore) {
		err := s.Complete(t.Context(), alice, "k1", runevents.IdempotentResponse{Status: 200, Body: []byte(`{}`)})
		if err == nil {
			t.Error("Complete without Begin succeeded")
		}
		if resp := begin(t, s, alice, "k1", requestHash(`{}`)); resp != nil {
			t.Errorf("Begin after a refused Complete = %+v; want a reservation", resp)
		}
	}},
	{"Concurrent50", func(t *testing.T, s runevents.IdempotencyStore) {
		h := requestHash(`{"same":true}`)
		var (
			wg                   sync.WaitGroup
			mu                   sync.Mutex
			reserved, conflicted int
		)
		for range 50 {
			wg.Go(func() {
				resp, err := s.Begin(t.Context(), alice, "k-shared", h)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil && resp == nil:
					reserved++
				case runstream.ErrorCodeOf(err) == runstream.CodeConflict:
					conflicted++
				default:
					t.Errorf("Begin = %+v, %v; want a reservation or CONFLICT", resp, err)
				}
			})
		}
		wg.Wait()
		if reserved != 1 || conflicted != 49 {
			t.Errorf("%d reservations and %d conflicts, want 1 and 49", reserved, conflicted)
		}
	}},
}
