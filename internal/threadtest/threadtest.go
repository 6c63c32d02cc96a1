// Package threadtest is test support: a thread service over memory stores,
// driven without HTTP, for the tests of the service and of what writes
// through it (the journal, the examples).
package threadtest

import (
	"testing"

	"github.com/runstream/runstream/contracts"
	"github.com/runstream/runstream/eventlog"
	"github.com/runstream/runstream/live"
	"github.com/runstream/runstream/memory"
	"github.com/runstream/runstream/runevents"
	"github.com/runstream/runstream/threadsvc"
)

// Service returns a thread service over new memory stores, with the
// contract validator and a hub of its own.
func Service(t testing.TB) *threadsvc.Service {
	t.Helper()
	return ServiceReading(t, func(r runevents.ThreadReader) runevents.ThreadReader { return r })
}

// ServiceReading is Service with its thread reads (existence and
// ownership checks, streams) made through reader(the memory store).
func ServiceReading(t testing.TB, reader func(runevents.ThreadReader) runevents.ThreadReader) *threadsvc.Service {
	t.Helper()
	return ServiceOver(t, func(s runevents.Store) runevents.Store { return s }, reader)
}

// ServiceOver is ServiceReading with its appends made through
// store(the memory store).
func ServiceOver(t testing.TB, store func(runevents.Store) runevents.Store, reader func(runevents.ThreadReader) runevents.ThreadReader) *threadsvc.Service {
	t.Helper()
	validator, err := contracts.NewValidator()
	if err != nil {
		t.Fatal(err)
	}
	events := memory.NewRunEventStore()
	hub := live.New(live.Config{})
	log := eventlog.NewThreadLog(store(events), validator, hub, eventlog.ThreadLimits{})
	return threadsvc.New(events, reader(events), memory.NewRunStore(), log, hub, threadsvc.Config{})
}
