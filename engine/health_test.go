package engine_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/engine"
)

// TestHealth: an engine is healthy once started; a store it cannot claim
// from makes it unhealthy, saying so, until a claim succeeds again; a
// stopped engine is unhealthy.
func TestHealth(t *testing.T) {
	e := newEnv(t)
	store := newPartitioned(e.store, false)
	eng, err := engine.New(engine.Config{Store: store, Log: e.log, PollInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.Health(); runstream.ErrorCodeOf(err) != runstream.CodeUnavailable || !strings.Contains(err.Error(), "not started") {
		t.Errorf("before Start: %v", err)
	}
	if err := eng.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitHealth := func(what string, ok func(error) bool) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for err := eng.Health(); !ok(err); err = eng.Health() {
			if time.Now().After(deadline) {
				t.Fatalf("%s: Health() = %v", what, err)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	waitHealth("started", func(err error) bool { return err == nil })
	store.cut()
	waitHealth("store cut off", func(err error) bool {
		return runstream.ErrorCodeOf(err) == runstream.CodeUnavailable && strings.Contains(runstream.ErrorMessage(err), "cannot claim runs: store unreachable")
	})
	store.heal()
	waitHealth("store healed", func(err error) bool { return err == nil })
	if err := eng.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := eng.Health(); !strings.Contains(runstream.ErrorMessage(err), "stopping") {
		t.Errorf("after Stop: %v", err)
	}
}
