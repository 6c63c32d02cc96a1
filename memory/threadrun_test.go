package memory_test

import (
	"testing"

	"github.com/runstream/runstream/memory"
	"github.com/runstream/runstream/runevents"
	"github.com/runstream/runstream/runeventstest"
)

func TestRunStoreConformance(t *testing.T) {
	runeventstest.RunStoreSuite(t, func(*testing.T) runevents.RunStore { return memory.NewRunStore() })
}

func TestThreadReaderConformance(t *testing.T) {
	runeventstest.ThreadReaderSuite(t, runeventstest.Harness{
		Open: func(*testing.T) runevents.Store { return memory.NewRunEventStore() },
	})
}
