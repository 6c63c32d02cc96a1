// Package backoff computes how long an HTTP client waits before it retries
// a request: exponential backoff with full jitter, at least what the
// server asked for with Retry-After. The remote producers (packages
// producer and chunkpush) share it.
package backoff

import (
	"context"
	"math/rand/v2"
	"net/http"
	"strconv"
	"time"
)

// Policy bounds the waits: the first retry waits up to Min, each later one
// up to twice as long as the one before, never more than Max. Min and Max
// must be positive, Min at most Max.
type Policy struct {
	Min, Max time.Duration
}

// Delay returns the wait before the retry that follows attempt (0 for the
// first request): a random duration in (0, min(Min·2^attempt, Max)], or
// retryAfter, capped at Max, when the server asked for longer.
func (p Policy) Delay(attempt int, retryAfter time.Duration) time.Duration {
	ceiling := p.Max
	if attempt < 30 && p.Min<<attempt > 0 {
		ceiling = min(p.Min<<attempt, p.Max)
	}
	d := time.Duration(rand.Int64N(int64(ceiling))) + 1
	if retryAfter > d {
		d = min(retryAfter, p.Max)
	}
	return d
}

// RetryAfter returns the wait a response's Retry-After header asks for,
// in whole seconds; 0 when it is absent or not a positive number of
// seconds (an HTTP date is not honoured).
func RetryAfter(h http.Header) time.Duration {
	secs, err := strconv.Atoi(h.Get("Retry-After"))
	if err != nil || secs <= 0 {
		return 0
	}
	return time.Duration(secs) * time.Second
}

// Sleep waits d or until ctx ends; it reports whether d passed.
func Sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
