package postgres

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/internal/backoff"
)

// NotifyChannel is the PostgreSQL notification channel on which the
// workflow store announces appends, with the payload "<run id>:<last seq>".
// Channels are per database, not per schema: instances on other schemas of
// the same database hear each other's notifications, which only cost them
// a read of the store.
const NotifyChannel = "runstream_workflow"

// ThreadNotifyChannel is the PostgreSQL notification channel on which the
// run-event store announces thread appends, with the payload "<thread
// id>:<last seq>", sent on commit like NotifyChannel's, or "<thread
// id>:<last seq>@<origin>" for an append that the store's group commit
// hook publishes (notifyOrigin).
const ThreadNotifyChannel = "runstream_thread"

// notifyOrigin is the tag that ends the notifications of a store's
// appends which its group commit hook publishes (RunEventStore.OnGroupCommit:
// the thread log hands them to this instance's hub itself): "@" and the
// store's origin, random per DB. A listener of the same DB told so
// (Listener.SkipOwnPublished) drops those notifications, as its instance
// has them already. Without that, about a third of a local append's
// notifications came before the hook's publication (both follow the
// commit, on two connections) and cost the hub a read of the store for
// events it was about to be given. Other processes' listeners wake on
// them as on any other.
//
// An append whose commit the committer could not confirm (a connection
// lost at the commit) is not published by the hook; if it did commit,
// this instance's followers get it from the hub's next periodic poll.
//
// A listener of a build before the tag (a rolling upgrade) cannot parse
// it: it logs "malformed notification ignored" for each tagged append
// and its followers get them at its poll interval until it is upgraded.
func notifyOrigin(origin string) string { return "@" + origin }

// untagged is the origin tag of the appends that the store does not
// publish through its group commit hook: every listener wakes on them.
const untagged = ""

// splitOrigin splits the origin tag off a notification's payload:
// "<id>:<seq>@<origin>" gives "<id>:<seq>" and origin; a payload without
// one is returned whole, with "". An id may hold '@': only one after the
// last ':' starts a tag.
func splitOrigin(payload string) (rest, origin string) {
	at := strings.LastIndexByte(payload, '@')
	if at < 0 || at < strings.LastIndexByte(payload, ':') {
		return payload, ""
	}
	return payload[:at], payload[at+1:]
}

// Reconnection of a Listener.
const (
	// listenBackoffMin is the first wait before reconnecting; each failed
	// attempt doubles it, up to listenBackoffMax.
	listenBackoffMin = 100 * time.Millisecond
	listenBackoffMax = 5 * time.Second
	// listenHealthy is how long a connection must have lived for the next
	// loss to start again from listenBackoffMin.
	listenHealthy = 10 * time.Second
	// listenPing is how long the listener waits for a notification before
	// it checks the connection with a ping: a connection cut without a
	// word (a network partition) would otherwise be waited on forever.
	listenPing = 30 * time.Second
	// listenTimeout bounds a connection attempt (with its LISTEN) and a
	// ping.
	listenTimeout = 10 * time.Second
)

// Listener receives the notifications of the workflow store of a database
// (from every process that appends to it) on a connection of its own,
// outside the pool. Create it with DB.NewListener and run it with Run.
//
// Notifications are wake-up hints, not a delivery guarantee: those sent
// while the listener is reconnecting are lost. Readers must also poll the
// store (live.Hub does, every PollInterval).
type Listener struct {
	config *pgx.ConnConfig
	// origin is the DB's run-event store's; with skipOwn, its tagged
	// thread notifications are dropped (notifyOrigin).
	origin   string
	skipOwn  bool
	onNotify func(runID string, seq int64)
	// onThread, when set, receives ThreadNotifyChannel's notifications;
	// onChunks ChunkNotifyChannel's.
	onThread func(threadID string, seq int64)
	onChunks func(runID string, seq int64)
	logger   *slog.Logger
	// connect opens the listening connection; tests replace it to refuse
	// reconnections.
	connect func(ctx context.Context) (*pgx.Conn, error)

	running    atomic.Bool
	pid        atomic.Uint32
	reconnects atomic.Int64
}

// NewListener returns a listener that calls onNotify (required) with the
// run id and last seq of every notified append. onNotify is called from Run's
// goroutine, one call at a time, and must not block (live.Hub.Wake does
// not). Closing db does not stop the listener: cancel Run's context.
func (db *DB) NewListener(onNotify func(runID string, seq int64)) *Listener {
	l := &Listener{config: db.pool.Config().ConnConfig, origin: db.runEvents.origin, onNotify: onNotify, logger: db.logger}
	l.connect = func(ctx context.Context) (*pgx.Conn, error) { return pgx.ConnectConfig(ctx, l.config) }
	return l
}

// OnThreadAppends makes the listener also listen on ThreadNotifyChannel
// and call fn with the thread id and last seq of every notified thread
// append, as onNotify is called (Run's goroutine, one call at a time,
// never blocking). Call it before Run. It returns l.
func (l *Listener) OnThreadAppends(fn func(threadID string, seq int64)) *Listener {
	l.onThread = fn
	return l
}

// SkipOwnPublished makes the listener leave out of OnThreadAppends' calls
// the appends of the DB's own run-event store that its group commit hook
// publishes (notifyOrigin). Call it only when that hook hands the records
// to what fn would wake (serve: the thread log publishes to the hub the
// listener wakes); a hook that does anything else would leave this
// instance's followers to their poll. Call it before Run. It returns l.
func (l *Listener) SkipOwnPublished() *Listener {
	l.skipOwn = true
	return l
}

// OnChunkAppends makes the listener also listen on ChunkNotifyChannel and
// call fn with the run id and hub seq of every notified chunk push, as
// onNotify is called. Call it before Run. It returns l.
func (l *Listener) OnChunkAppends(fn func(runID string, seq int64)) *Listener {
	l.onChunks = fn
	return l
}

// BackendPID returns the PostgreSQL backend process id of the listening
// connection, or 0 while the listener is not listening.
func (l *Listener) BackendPID() uint32 { return l.pid.Load() }

// Reconnects returns how often the listener connected again after it lost
// its connection or could not connect, for metrics.
func (l *Listener) Reconnects() int64 { return l.reconnects.Load() }

// Run connects, listens on NotifyChannel and calls onNotify for each
// well-formed notification until ctx is done; then it closes its
// connection and returns ctx.Err(). A lost connection is logged once (at
// warn) and reopened with exponential backoff and jitter: waits from
// 100 ms doubling to 5 s, back to 100 ms after a connection that lived
// 10 s. Malformed payloads are logged at warn and skipped. Run fails at
// once with CodeConflict when the listener is already running.
func (l *Listener) Run(ctx context.Context) error {
	if !l.running.CompareAndSwap(false, true) {
		return runstream.Errorf(runstream.CodeConflict, "postgres: listener is already running")
	}
	defer l.running.Store(false)
	var (
		wait reconnectDelay
		lost bool // a loss was logged and no connection has succeeded since
	)
	for {
		conn, err := l.open(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if !lost {
				l.logger.Warn("postgres: listener cannot connect; retrying", "error", err)
				lost = true
			} else {
				l.logger.Debug("postgres: listener reconnection failed", "error", err)
			}
			if !backoff.Sleep(ctx, wait.next()) {
				return ctx.Err()
			}
			continue
		}
		if lost {
			l.logger.Info("postgres: listener reconnected")
			l.reconnects.Add(1)
			lost = false
		}
		l.pid.Store(conn.PgConn().PID())
		connected := time.Now()
		err = l.receive(ctx, conn)
		l.pid.Store(0)
		closeCtx, cancel := context.WithTimeout(context.Background(), time.Second)
		conn.Close(closeCtx)
		cancel()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		l.logger.Warn("postgres: listener connection lost; reconnecting", "error", err)
		lost = true
		if time.Since(connected) >= listenHealthy {
			wait.reset()
		}
		if !backoff.Sleep(ctx, wait.next()) {
			return ctx.Err()
		}
	}
}

// open connects and listens.
func (l *Listener) open(ctx context.Context) (*pgx.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, listenTimeout)
	defer cancel()
	conn, err := l.connect(ctx)
	if err != nil {
		return nil, err
	}
	listen := "LISTEN " + NotifyChannel
	if l.onThread != nil {
		listen += "; LISTEN " + ThreadNotifyChannel
	}
	if l.onChunks != nil {
		listen += "; LISTEN " + ChunkNotifyChannel
	}
	if _, err := conn.Exec(ctx, listen); err != nil {
		conn.Close(ctx)
		return nil, err
	}
	return conn, nil
}

// receive hands notifications to onNotify until ctx is done or the
// connection fails, and returns why.
func (l *Listener) receive(ctx context.Context, conn *pgx.Conn) error {
	for {
		waitCtx, cancel := context.WithTimeout(ctx, listenPing)
		n, err := conn.WaitForNotification(waitCtx)
		cancel()
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case err != nil && pgconn.Timeout(err) && !conn.IsClosed():
			// Quiet for a while: make sure the connection is alive.
			pingCtx, cancel := context.WithTimeout(ctx, listenTimeout)
			err = conn.Ping(pingCtx)
			cancel()
			if err != nil {
				return err
			}
		case err != nil:
			return err
		case n.Channel == NotifyChannel || n.Channel == ThreadNotifyChannel && l.onThread != nil || n.Channel == ChunkNotifyChannel && l.onChunks != nil:
			payload := n.Payload
			if n.Channel == ThreadNotifyChannel { // the only channel with an origin tag
				var origin string
				if payload, origin = splitOrigin(payload); l.skipOwn && origin != "" && origin == l.origin {
					continue // published on this instance by the group commit hook
				}
			}
			id, seq, ok := parsePayload(payload)
			if !ok {
				l.logger.Warn("postgres: listener: malformed notification ignored", "channel", n.Channel, "payload_bytes", len(n.Payload))
				continue
			}
			switch n.Channel {
			case NotifyChannel:
				l.onNotify(id, seq)
			case ThreadNotifyChannel:
				l.onThread(id, seq)
			default:
				l.onChunks(id, seq)
			}
		}
	}
}

// parsePayload reads "<run id>:<seq>": a non-empty run id (which may hold
// colons) and a positive decimal seq.
func parsePayload(payload string) (runID string, seq int64, ok bool) {
	i := strings.LastIndexByte(payload, ':')
	if i <= 0 {
		return "", 0, false
	}
	digits := payload[i+1:]
	if digits == "" || digits[0] < '0' || digits[0] > '9' {
		return "", 0, false // ParseInt would accept a sign
	}
	seq, err := strconv.ParseInt(digits, 10, 64)
	if err != nil || seq < 1 {
		return "", 0, false
	}
	return payload[:i], seq, true
}

// reconnectDelay is an exponential delay with jitter: the n-th wait since a reset
// is drawn from [d/2, d), where d is listenBackoffMin doubled n-1 times, at
// most listenBackoffMax.
type reconnectDelay struct{ d time.Duration }

func (b *reconnectDelay) next() time.Duration {
	if b.d == 0 {
		b.d = listenBackoffMin
	}
	d := b.d
	b.d = min(2*b.d, listenBackoffMax)
	return d/2 + rand.N(d/2)
}

func (b *reconnectDelay) reset() { b.d = 0 }
