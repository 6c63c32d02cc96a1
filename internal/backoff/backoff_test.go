package backoff

import (
	"context"
	"net/http"
	"testing"
	"time"
)

func TestDelayGrowsWithinBounds(t *testing.T) {
	p := Policy{Min: 100 * time.Millisecond, Max: 2 * time.Second}
	for attempt := range 40 {
		ceiling := p.Max
		if attempt < 5 {
			ceiling = p.Min << attempt
		}
		for range 200 {
			if d := p.Delay(attempt, 0); d <= 0 || d > ceiling {
				t.Fatalf("attempt %d: delay %s outside (0, %s]", attempt, d, ceiling)
			}
		}
	}
}

func TestDelayHonoursRetryAfterUpToMax(t *testing.T) {
	p := Policy{Min: time.Millisecond, Max: 5 * time.Second}
	if d := p.Delay(0, 3*time.Second); d != 3*time.Second {
		t.Errorf("Retry-After 3s: delay %s", d)
	}
	if d := p.Delay(0, time.Minute); d != p.Max {
		t.Errorf("Retry-After 1m: delay %s, want the maximum %s", d, p.Max)
	}
}

func TestRetryAfter(t *testing.T) {
	for value, want := range map[string]time.Duration{"": 0, "2": 2 * time.Second, "0": 0, "-1": 0, "soon": 0,
		"Wed, 21 Oct 2015 07:28:00 GMT": 0} {
		h := http.Header{}
		if value != "" {
			h.Set("Retry-After", value)
		}
		if got := RetryAfter(h); got != want {
			t.Errorf("Retry-After %q: %s, want %s", value, got, want)
		}
	}
}

func TestSleepEndsWithContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if Sleep(ctx, time.Hour) {
		t.Fatal("Sleep of an hour with a cancelled context reported the hour passed")
	}
	if !Sleep(context.Background(), time.Millisecond) {
		t.Fatal("Sleep of 1ms did not pass")
	}
}
