package sqlite

import (
	"context"

	"github.com/runstream/runstream"
)

// Ping checks that the database answers a read, for readiness probes.
func (db *DB) Ping(ctx context.Context) error {
	var one int
	if err := db.readers.QueryRowContext(ctx, "SELECT 1").Scan(&one); err != nil {
		return runstream.Wrap(err, runstream.CodeUnavailable, "sqlite: ping")
	}
	return nil
}
