package runeventstest_test

import (
	"testing"

	"github.com/runstream/runstream/memory"
	"github.com/runstream/runstream/runevents"
	"github.com/runstream/runstream/runeventstest"
)

// keptStore is a memory store that outlives Close, so that "reopening" it
// hands back the same data. It lets the suite's reopen step run against
// the reference backend, which has nothing of its own to reopen.
type keptStore struct{ *memory.RunEventStore }

func (keptStore) Close() error { return nil }

// TestSuiteOnReference runs the whole suite, reopen step included, against
// the reference backend: the suite must pass on a correct store.
func TestSuiteOnReference(t *testing.T) {
	runeventstest.RunEventStore(t, runeventstest.Harness{
		Open: func(*testing.T) runevents.Store { return memory.NewRunEventStore() },
		OpenReopenable: func(*testing.T) (runevents.Store, func() runevents.Store) {
			s := keptStore{memory.NewRunEventStore()}
			return s, func() runevents.Store { return s }
		},
	})
}

func TestMeasureFsync(t *testing.T) {
	t.Parallel()
	p50, p99 := runeventstest.MeasureFsync(t, t.TempDir())
	if p50 <= 0 || p99 < p50 {
		t.Errorf("MeasureFsync = p50 %v, p99 %v; want 0 < p50 <= p99", p50, p99)
	}
}
