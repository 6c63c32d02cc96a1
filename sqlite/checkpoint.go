package sqlite

import (
	"context"
	"database/sql"
	"sync/atomic"
	"time"
)

// checkpointInterval is how often the checkpointer copies the WAL back
// into the database file.
const checkpointInterval = 100 * time.Millisecond

// walRestartFrames is how long the WAL may grow, in frames (pages), before
// the write loop pauses for a checkpoint to catch up (checkpointer.behind):
// SQLite's own automatic checkpoint waits for as many.
const walRestartFrames = 1000

// checkpointer copies committed WAL frames into the database file on a
// connection of its own, so that the writer never pays for the bulk of
// the checkpoints (SQLite's automatic checkpoint is turned off on the
// writer connection): the copy, and with synchronous=NORMAL the only
// fsyncs, run on the other core while the writer commits. PASSIVE
// checkpoints never block the writer or readers.
//
// The WAL starts over (the next write goes to its beginning, and the file
// stops growing) only when a write transaction begins after a checkpoint
// has copied every frame, and no reader needs the old ones. Under a steady
// stream of commits that never happens: a commit lands while each
// background checkpoint copies. So when a checkpoint finds the WAL
// restartFrames long or more, the checkpointer marks itself behind, and
// the write loop, before its next group, waits for a checkpoint with no
// commit in between (catchUp): it copies the few frames committed since
// the last one, and the group's write starts the WAL over. Without it, the
// WAL of a busy server grew by tens of MB a second for as long as the
// writes went on, every commit extended the file, and a restart read all
// of it back.
//
// A reader that keeps a transaction open holds the frames it may read: no
// checkpoint copies past them and the WAL cannot start over until it
// ends. The write loop then waits for a catch-up at most once per
// background checkpoint (checkpointInterval), each copying what it can.
type checkpointer struct {
	conn          *sql.DB
	interval      time.Duration // between background checkpoints
	restartFrames int           // walRestartFrames
	quit          chan struct{}
	done          chan struct{}
	// behind is set when a checkpoint found a WAL of restartFrames or
	// more; catchUp clears it.
	behind atomic.Bool
	// catchUps carries the write loop's requests for a checkpoint now;
	// the checkpointer closes each channel once it ran one.
	catchUps chan chan struct{}
	// ticks and caughtUp count the background checkpoints and the
	// catch-ups, for tests.
	ticks, caughtUp atomic.Int64
}

// startCheckpointer starts checkpointing on conn every interval; a WAL of
// restartFrames or more makes it behind.
func startCheckpointer(conn *sql.DB, interval time.Duration, restartFrames int) *checkpointer {
	c := &checkpointer{conn: conn, interval: interval, restartFrames: restartFrames,
		quit: make(chan struct{}), done: make(chan struct{}), catchUps: make(chan chan struct{})}
	go c.loop()
	return c
}

func (c *checkpointer) loop() {
	defer close(c.done)
	ticker := time.NewTicker(c.interval)
	defer ticker.Stop()
	for {
		select {
		case <-c.quit:
			return
		case <-ticker.C:
			c.ticks.Add(1)
			c.checkpoint(true)
		case ran := <-c.catchUps:
			c.caughtUp.Add(1)
			// The WAL it leaves as long is started over by the next
			// write: no reason for another catch-up.
			c.checkpoint(false)
			close(ran)
		}
	}
}

// checkpoint runs a PASSIVE checkpoint and, when mark is true, sets
// behind when it found a WAL of restartFrames or more. A failed
// checkpoint leaves the frames in the WAL, where reads find them; the
// next one tries again.
func (c *checkpointer) checkpoint(mark bool) {
	var busy, frames, copied int
	err := c.conn.QueryRowContext(context.Background(), "PRAGMA wal_checkpoint(PASSIVE)").Scan(&busy, &frames, &copied)
	if mark && err == nil && frames >= c.restartFrames {
		c.behind.Store(true)
	}
}

// catchUp runs a checkpoint now and waits for it, when the last one left
// the WAL behind. The write loop calls it between groups, so no commit
// lands while the checkpoint copies.
func (c *checkpointer) catchUp() {
	if !c.behind.Swap(false) {
		return
	}
	ran := make(chan struct{})
	select {
	case c.catchUps <- ran:
		<-ran
	case <-c.done:
	}
}

// close stops the loop, copies what is left, and closes the connection.
func (c *checkpointer) close() error {
	close(c.quit)
	<-c.done
	c.checkpoint(false)
	return c.conn.Close()
}
