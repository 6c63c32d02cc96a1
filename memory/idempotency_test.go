package memory_test

import (
	"sync"
	"testing"
	"time"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/memory"
	"github.com/runstream/runstream/runevents"
	"github.com/runstream/runstream/runeventstest"
)

func TestIdempotencyConformance(t *testing.T) {
	runeventstest.IdempotencySuite(t, func(*testing.T) runevents.IdempotencyStore { return memory.NewIdempotencyStore() })
}

// clock is a settable clock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func TestIdempotencyExpiry(t *testing.T) {
	t.Parallel()
	c := &clock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	s := memory.NewIdempotencyStore(memory.WithClock(c.Now))
	ctx := t.Context()
	hash := []byte("h1")
	if resp, err := s.Begin(ctx, "u", "k", hash); resp != nil || err != nil {
		t.Fatalf("Begin = %+v, %v", resp, err)
	}
	if err := s.Complete(ctx, "u", "k", runevents.IdempotentResponse{Status: 201, Body: []byte("first")}); err != nil {
		t.Fatal(err)
	}
	c.Add(memory.IdempotencyTTL - time.Second)
	if resp, err := s.Begin(ctx, "u", "k", []byte("other")); runstream.ErrorCodeOf(err) != runstream.CodeValidationFailed {
		t.Fatalf("Begin with another hash before expiry = %+v, %v; want VALIDATION_FAILED", resp, err)
	}
	c.Add(time.Second)
	if resp, err := s.Begin(ctx, "u", "k", []byte("other")); resp != nil || err != nil {
		t.Errorf("Begin after expiry = %+v, %v; want a new reservation", resp, err)
	}
}

func TestIdempotencyKeyChecks(t *testing.T) {
	t.Parallel()
	s := memory.NewIdempotencyStore()
	long := make([]byte, 256)
	for i := range long {
		long[i] = 'k'
	}
	for _, key := range []string{"", string(long), "tab\tkey", "é"} {
		_, err := s.Begin(t.Context(), "u", key, []byte("h"))
		if runstream.ErrorCodeOf(err) != runstream.CodeInvalidArgument {
			t.Errorf("Begin with key %q: %v, want INVALID_ARGUMENT", key, err)
		}
	}
	if _, err := s.Begin(t.Context(), "u", string(long[:255]), []byte("h")); err != nil {
		t.Errorf("Begin with a 255-character key: %v", err)
	}
}
