package sqlite

import (
	"testing"

	"github.com/runstream/runstream/runchunks"
	"github.com/runstream/runstream/runchunks/runchunkstest"
	"github.com/runstream/runstream/runevents"
)

func TestChunkStoreConformance(t *testing.T) {
	t.Parallel()
	runchunkstest.Run(t, runchunkstest.Harness{Open: func(t *testing.T) (runchunks.Store, runevents.RunStore) {
		db := newDB(t, Config{})
		return db.Chunks(), db.Runs()
	}})
}
