package ssestream

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// openSource is a stream without stored events that never ends.
type openSource struct{ *storedSource }

func (openSource) End(context.Context, int64) ([]byte, bool, bool, error) {
	return nil, false, false, nil
}

// A silent stream gets a heartbeat after each Heartbeat of silence and is
// closed when its MaxLifetime runs out, between two heartbeats.
func TestSilentStreamHeartbeatsUntilItsLifetimeEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		set := NewSet(Config{Heartbeat: 15 * time.Second, MaxLifetime: 50 * time.Second})
		rec := httptest.NewRecorder()
		start := time.Now()
		if err := set.Serve(rec, httptest.NewRequestWithContext(t.Context(), "GET", "/", nil), openSource{newStoredSource(0)}, 0, Options{}); err != nil {
			t.Fatalf("Serve: %v", err)
		}
		if took := time.Since(start); took != 50*time.Second {
			t.Errorf("the stream lasted %v, want its lifetime, 50s", took)
		}
		if n := strings.Count(rec.Body.String(), ": heartbeat\n"); n != 3 {
			t.Errorf("%d heartbeats in 50s, want 3 (at 15, 30 and 45s): %q", n, rec.Body.String())
		}
	})
}

// A stream whose credential is revoked (Options.AfterRevoke calls end)
// ends then, as when its lifetime runs out, and its revocation callback
// is stopped once it ended.
func TestStreamEndsWhenItsCredentialIsRevoked(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		set := NewSet(Config{Heartbeat: 15 * time.Second, MaxLifetime: time.Hour})
		var stopped int
		opts := Options{AfterRevoke: func(end func()) func() {
			time.AfterFunc(20*time.Second, end) // the keys file reloaded without the key
			return func() { stopped++ }
		}}
		rec := httptest.NewRecorder()
		start := time.Now()
		if err := set.Serve(rec, httptest.NewRequestWithContext(t.Context(), "GET", "/", nil), openSource{newStoredSource(0)}, 0, opts); err != nil {
			t.Fatalf("Serve: %v", err)
		}
		if took := time.Since(start); took != 20*time.Second {
			t.Errorf("the stream lasted %v, want 20s, until its credential was revoked", took)
		}
		if stopped != 1 {
			t.Errorf("the revocation callback was stopped %d times, want once", stopped)
		}
		if n := strings.Count(rec.Body.String(), ": heartbeat\n"); n != 1 {
			t.Errorf("%d heartbeats in 20s, want 1: %q", n, rec.Body.String())
		}
	})
}
