package memory_test

import (
	"testing"

	"github.com/runstream/runstream/memory"
	"github.com/runstream/runstream/runchunks"
	"github.com/runstream/runstream/runchunks/runchunkstest"
	"github.com/runstream/runstream/runevents"
)

func TestChunkStoreConformance(t *testing.T) {
	runchunkstest.Run(t, runchunkstest.Harness{Open: func(t *testing.T) (runchunks.Store, runevents.RunStore) {
		runs := memory.NewRunStore()
		return memory.NewChunkStore(runs), runs
	}})
}
