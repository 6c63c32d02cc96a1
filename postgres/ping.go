package postgres

import (
	"context"

	"github.com/runstream/runstream"
)

// Ping checks that the database answers on a pooled connection, for
// readiness probes.
func (db *DB) Ping(ctx context.Context) error {
	if err := db.pool.Ping(ctx); err != nil {
		return runstream.Wrap(err, runstream.CodeUnavailable, "postgres: ping")
	}
	return nil
}
