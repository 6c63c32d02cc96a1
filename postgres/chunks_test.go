package postgres

import (
	"testing"

	"github.com/runstream/runstream/runchunks"
	"github.com/runstream/runstream/runchunks/runchunkstest"
	"github.com/runstream/runstream/runevents"
)

func TestChunkStoreConformance(t *testing.T) {
	runchunkstest.Run(t, runchunkstest.Harness{Open: func(t *testing.T) (runchunks.Store, runevents.RunStore) {
		db := openDB(t, newSchema(t))
		return db.Chunks(), db.Runs()
	}})
}
