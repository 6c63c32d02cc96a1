package memory_test

import (
	"testing"

	"github.com/runstream/runstream/memory"
	"github.com/runstream/runstream/runevents"
	"github.com/runstream/runstream/storetest"
)

func TestRunStoreConformance(t *testing.T) {
	storetest.RunStoreSuite(t, func(*testing.T) runevents.RunStore { return memory.NewRunStore() })
}

func TestThreadReaderConformance(t *testing.T) {
	storetest.ThreadReaderSuite(t, storetest.Harness{
		Open: func(*testing.T) runevents.Store { return memory.NewRunEventStore() },
	})
}
