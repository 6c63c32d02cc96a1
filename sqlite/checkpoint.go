package sqlite

import (
	"context"
	"database/sql"
	"time"
)

// checkpointInterval is how often the checkpointer copies the WAL back
// into the database file.
const checkpointInterval = 100 * time.Millisecond

// checkpointer copies committed WAL frames into the database file on a
// connection of its own, so that the writer never pays for checkpoints
// (SQLite's automatic checkpoint is turned off on the writer connection):
// the copy, and with synchronous=NORMAL the only fsyncs, run on the other
// core while the writer commits. PASSIVE checkpoints never block the writer
// or readers; once a checkpoint has copied every frame and no reader needs
// the old ones, the next write starts the WAL over, so it does not grow
// without bound.
type checkpointer struct {
	conn *sql.DB
	quit chan struct{}
	done chan struct{}
}

func startCheckpointer(conn *sql.DB) *checkpointer {
	c := &checkpointer{conn: conn, quit: make(chan struct{}), done: make(chan struct{})}
	go c.loop()
	return c
}

func (c *checkpointer) loop() {
	defer close(c.done)
	ticker := time.NewTicker(checkpointInterval)
	defer ticker.Stop()
	for {
		select {
		case <-c.quit:
			return
		case <-ticker.C:
			// A failed checkpoint leaves the frames in the WAL, where reads
			// find them; the next tick tries again.
			c.conn.ExecContext(context.Background(), "PRAGMA wal_checkpoint(PASSIVE)")
		}
	}
}

// close stops the loop, copies what is left, and closes the connection.
func (c *checkpointer) close() error {
	close(c.quit)
	<-c.done
	c.conn.ExecContext(context.Background(), "PRAGMA wal_checkpoint(PASSIVE)")
	return c.conn.Close()
}
