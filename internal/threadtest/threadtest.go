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
	events := memory.NewRunEventStore()
	return newService(t, events, reader(events), store(events))
}

// EventStore is what a thread service reads, and appends through, in one
// store: a memory store, or a wrapper of one that counts or holds calls.
type EventStore interface {
	threadsvc.EventStore
	runevents.Store
	runevents.ThreadReader
}

// ServiceOn is Service with every read and append of its events made
// through events.
func ServiceOn(t testing.TB, events EventStore) *threadsvc.Service {
	t.Helper()
	return newService(t, events, events, events)
}

func newService(t testing.TB, events threadsvc.EventStore, reader runevents.ThreadReader, appends runevents.Store) *threadsvc.Service {
	t.Helper()
	validator, err := contracts.NewValidator()
	if err != nil {
		t.Fatal(err)
	}
	hub := live.New(live.Config{})
	log := eventlog.NewThreadLog(appends, validator, hub, eventlog.ThreadLimits{})
	return threadsvc.New(events, reader, memory.NewRunStore(), log, hub, threadsvc.Config{})
}
