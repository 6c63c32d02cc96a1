package health_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/health"
)

// TestCheck: every part is reported; a failing part names itself in the
// UNAVAILABLE error, with its caller-safe message only; a part that hangs
// is cut by its timeout.
func TestCheck(t *testing.T) {
	parts := []health.Part{
		{Name: "store", Check: func(context.Context) error { return nil }},
		{Name: "listener", Check: func(context.Context) error {
			return runstream.Errorf(runstream.CodeUnavailable, "not connected")
		}},
		{Name: "engine", Check: func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }},
		{Name: "other", Check: func(context.Context) error { return errors.New("dial 10.0.0.7: secret cause") }},
	}
	statuses, err := health.Check(context.Background(), parts)
	if runstream.ErrorCodeOf(err) != runstream.CodeUnavailable {
		t.Fatalf("err = %v", err)
	}
	msg := runstream.ErrorMessage(err)
	if msg != "not ready: engine: internal error; listener: not connected; other: internal error" || strings.Contains(msg, "10.0.0.7") {
		t.Errorf("message = %q", msg)
	}
	if statuses["store"].Status != "ready" || statuses["listener"] != (health.Status{Status: "unavailable", Message: "not connected"}) || statuses["engine"].Status != "unavailable" {
		t.Errorf("statuses = %v", statuses)
	}
	if got := runstream.AsError(err).Details["parts"]; got == nil {
		t.Errorf("no details.parts")
	}
	statuses, err = health.Check(context.Background(), parts[:1])
	if err != nil || len(statuses) != 1 {
		t.Errorf("all ready: %v %v", statuses, err)
	}
}

// The parts are checked at the same time: two parts that each wait for
// the other to have started are both ready (checked one after the other,
// the first would wait out its timeout).
func TestCheckRunsThePartsTogether(t *testing.T) {
	a, b := make(chan struct{}), make(chan struct{})
	meet := func(mine, other chan struct{}) func(context.Context) error {
		return func(ctx context.Context) error {
			close(mine)
			select {
			case <-other:
				return nil
			case <-ctx.Done():
				return runstream.Errorf(runstream.CodeUnavailable, "the other part never started")
			}
		}
	}
	statuses, err := health.Check(context.Background(), []health.Part{{Name: "a", Check: meet(a, b)}, {Name: "b", Check: meet(b, a)}})
	if err != nil || statuses["a"].Status != "ready" || statuses["b"].Status != "ready" {
		t.Errorf("statuses %v, %v; want both ready", statuses, err)
	}
}
