package postgres

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/runevents"
	"github.com/runstream/runstream/workflow"
)

func TestParsePayload(t *testing.T) {
	t.Parallel()
	cases := []struct {
		payload string
		runID   string
		seq     int64
		ok      bool
	}{
		{"run-1:7", "run-1", 7, true},
		{"a:b:c:12", "a:b:c", 12, true},
		{"run-1:9223372036854775807", "run-1", 9223372036854775807, true},
		{"run-1", "", 0, false},
		{":7", "", 0, false},
		{"run-1:", "", 0, false},
		{"run-1:0", "", 0, false},
		{"run-1:-3", "", 0, false},
		{"run-1:+3", "", 0, false},
		{"run-1:3x", "", 0, false},
		{"run-1:9223372036854775808", "", 0, false},
		{"", "", 0, false},
	}
	for _, c := range cases {
		runID, seq, ok := parsePayload(c.payload)
		if runID != c.runID || seq != c.seq || ok != c.ok {
			t.Errorf("parsePayload(%q) = %q, %d, %t; want %q, %d, %t", c.payload, runID, seq, ok, c.runID, c.seq, c.ok)
		}
	}
}

func TestSplitOrigin(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ payload, rest, origin string }{
		{"t1:7", "t1:7", ""},
		{"t1:7@ABC", "t1:7", "ABC"},
		{"a@b:7", "a@b:7", ""},        // '@' in the id
		{"a@b:7@ABC", "a@b:7", "ABC"}, // and a tag
		{"a:b@c:7", "a:b@c:7", ""},
		{"t1:7@", "t1:7", ""},
	} {
		if rest, origin := splitOrigin(c.payload); rest != c.rest || origin != c.origin {
			t.Errorf("splitOrigin(%q) = %q, %q; want %q, %q", c.payload, rest, origin, c.rest, c.origin)
		}
	}
}

// TestListenerSkipsOwnPublishedThreadAppends: a DB's listener told to
// (SkipOwnPublished) is not told of the thread appends its own store's
// group commit hook publishes, and is told of every other: another DB's
// (hook or not), and its own that no hook publishes (PutIfAbsent; a store
// without a hook). A listener not told to hears them all.
func TestListenerSkipsOwnPublishedThreadAppends(t *testing.T) {
	t.Parallel()
	schema := newSchema(t)
	a, b, c := openDB(t, schema), openDB(t, schema), openDB(t, schema) // c without a hook
	var published atomic.Int64
	a.RunEvents().OnGroupCommit(func(recs []runevents.Record) { published.Add(int64(len(recs))) })
	b.RunEvents().OnGroupCommit(func([]runevents.Record) {})
	heardA, heardB, heardC, heardAll := newHeard(), newHeard(), newHeard(), newHeard()
	startListener(t, a.NewListener(func(string, int64) {}).OnThreadAppends(heardA.onNotify).SkipOwnPublished())
	startListener(t, b.NewListener(func(string, int64) {}).OnThreadAppends(heardB.onNotify).SkipOwnPublished())
	startListener(t, c.NewListener(func(string, int64) {}).OnThreadAppends(heardC.onNotify).SkipOwnPublished())
	startListener(t, a.NewListener(func(string, int64) {}).OnThreadAppends(heardAll.onNotify))

	ctx := t.Context()
	if _, err := a.RunEvents().Put(ctx, prepEvent("t1", "r1")); err != nil { // seq 1: a's hook publishes it
		t.Fatal(err)
	}
	if _, err := b.RunEvents().Put(ctx, prepEvent("t1", "r1")); err != nil { // seq 2: b's
		t.Fatal(err)
	}
	if _, _, err := a.RunEvents().PutIfAbsent(ctx, runevents.NewEvent{ThreadID: "t1", RunID: "r1", // seq 3: a's, outside the hook
		EventType: runevents.EventRunDelivery, Category: runevents.CategoryOutputs, UserID: "u"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.RunEvents().Put(ctx, prepEvent("t1", "r1")); err != nil { // seq 4: c's, which no hook publishes
		t.Fatal(err)
	}
	for _, h := range []*heard{heardA, heardB, heardC, heardAll} {
		h.waitFor(t, "t1", 4)
	}
	for _, l := range []struct {
		name  string
		heard *heard
		want  []int64
	}{{"a", heardA, []int64{2, 3, 4}}, {"b", heardB, []int64{1, 3, 4}}, {"c", heardC, []int64{1, 2, 3, 4}},
		{"a's other, not told to skip", heardAll, []int64{1, 2, 3, 4}}} {
		if got := l.heard.seqs("t1"); !slices.Equal(got, l.want) {
			t.Errorf("listener %s heard seqs %v, want %v", l.name, got, l.want)
		}
	}
	if n := published.Load(); n != 1 {
		t.Errorf("a's hook published %d records, want 1", n)
	}
}

// ceilings are the upper bounds of the first waits of a reconnectDelay.
var ceilings = []time.Duration{100, 200, 400, 800, 1600, 3200, 5000, 5000, 5000}

func TestReconnectDelay(t *testing.T) {
	t.Parallel()
	var b reconnectDelay
	for round := range 2 {
		for i, ceiling := range ceilings {
			ceiling *= time.Millisecond
			if d := b.next(); d < ceiling/2 || d >= ceiling {
				t.Errorf("round %d, wait %d: %s, want in [%s, %s)", round, i, d, ceiling/2, ceiling)
			}
		}
		b.reset()
	}
}

// logRecorder is a slog.Handler that keeps the records it handles.
type logRecorder struct {
	mu      sync.Mutex
	records []slog.Record
}

func (h *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (h *logRecorder) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *logRecorder) WithGroup(string) slog.Handler            { return h }

func (h *logRecorder) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.records = append(h.records, r.Clone())
	return nil
}

// count returns the number of records at level whose message contains
// text.
func (h *logRecorder) count(level slog.Level, text string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, r := range h.records {
		if r.Level == level && strings.Contains(r.Message, text) {
			n++
		}
	}
	return n
}

// TestListenerRetriesWithBackoff: while the database cannot be reached the
// listener retries with growing, jittered waits, logs the loss once, and
// returns ctx.Err() when ctx is done. A second Run is refused meanwhile.
func TestListenerRetriesWithBackoff(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		logs := &logRecorder{}
		var attempts []time.Time
		l := &Listener{logger: slog.New(logs), onNotify: func(string, int64) { t.Error("notified without a connection") }}
		l.connect = func(context.Context) (*pgx.Conn, error) {
			attempts = append(attempts, time.Now())
			return nil, errors.New("connection refused")
		}
		ctx, cancel := context.WithCancel(t.Context())
		result := make(chan error, 1)
		go func() { result <- l.Run(ctx) }()
		synctest.Wait()
		if err := l.Run(ctx); runstream.ErrorCodeOf(err) != runstream.CodeConflict {
			t.Errorf("second Run: %v, want %s", err, runstream.CodeConflict)
		}
		time.Sleep(30 * time.Second)
		cancel()
		if err := <-result; !errors.Is(err, context.Canceled) {
			t.Errorf("Run returned %v, want context.Canceled", err)
		}

		if len(attempts) < len(ceilings)+1 {
			t.Fatalf("%d attempts in 30 s, want at least %d", len(attempts), len(ceilings)+1)
		}
		for i := 1; i < len(attempts); i++ {
			ceiling := 5 * time.Second
			if i <= len(ceilings) {
				ceiling = ceilings[i-1] * time.Millisecond
			}
			if gap := attempts[i].Sub(attempts[i-1]); gap < ceiling/2 || gap >= ceiling {
				t.Errorf("wait before attempt %d: %s, want in [%s, %s)", i, gap, ceiling/2, ceiling)
			}
		}
		if n := logs.count(slog.LevelWarn, ""); n != 1 {
			t.Errorf("%d warnings for one loss, want 1", n)
		}
		if l.BackendPID() != 0 {
			t.Errorf("BackendPID %d without a connection, want 0", l.BackendPID())
		}
	})
}

// openLoggedDB opens a DB over schema whose listeners log to logs.
func openLoggedDB(t *testing.T, schema string, logs *logRecorder) *DB {
	t.Helper()
	db, err := Open(t.Context(), Config{URL: testURL(t), Schema: schema, MaxConns: 4, Logger: slog.New(logs)})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// heard collects the notifications a listener hands over.
type heard struct {
	mu   sync.Mutex
	got  map[string][]int64
	more chan struct{}
}

func newHeard() *heard { return &heard{got: map[string][]int64{}, more: make(chan struct{}, 1)} }

func (h *heard) onNotify(runID string, seq int64) {
	h.mu.Lock()
	h.got[runID] = append(h.got[runID], seq)
	h.mu.Unlock()
	select {
	case h.more <- struct{}{}:
	default:
	}
}

func (h *heard) seqs(runID string) []int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]int64{}, h.got[runID]...)
}

// waitFor waits until seq of runID was heard.
func (h *heard) waitFor(t *testing.T, runID string, seq int64) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		for _, s := range h.seqs(runID) {
			if s == seq {
				return
			}
		}
		select {
		case <-h.more:
		case <-timeout:
			t.Fatalf("seq %d of run %s not heard; heard %v", seq, runID, h.seqs(runID))
		}
	}
}

// startListener runs l until the test ends and waits until it listens.
func startListener(t *testing.T, l *Listener) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	result := make(chan error, 1)
	go func() { result <- l.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-result; !errors.Is(err, context.Canceled) {
			t.Errorf("Run returned %v, want context.Canceled", err)
		}
	})
	waitListening(t, l, 0)
}

// waitListening waits until l listens on a connection other than the one
// of backend pid not.
func waitListening(t *testing.T, l *Listener, not uint32) uint32 {
	t.Helper()
	for range 1000 {
		if pid := l.BackendPID(); pid != 0 && pid != not {
			return pid
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("the listener does not listen")
	return 0
}

// TestListenerHearsOtherInstance: a listener of one DB hears the appends
// made through another DB on the same schema.
func TestListenerHearsOtherInstance(t *testing.T) {
	t.Parallel()
	schema := newSchema(t)
	a, b := openDB(t, schema), openDB(t, schema)
	h := newHeard()
	startListener(t, b.NewListener(h.onNotify))

	run := newTestRun(t, a.Workflows(), "alice", workflow.NewEvent{Event: workflow.EventRunCreated})
	h.waitFor(t, run.ID, 1)
	if _, err := a.Workflows().Append(t.Context(), workflow.AppendParams{RunID: run.ID,
		Events: []workflow.NewEvent{progressEvent(`{}`), progressEvent(`{}`)}}); err != nil {
		t.Fatal(err)
	}
	h.waitFor(t, run.ID, 3)
	if got := h.seqs(run.ID); len(got) != 2 || got[0] != 1 || got[1] != 3 {
		t.Errorf("heard seqs %v, want [1 3]: one notification per transaction", got)
	}
}

// TestListenerReconnects: after its backend is terminated, the listener
// reconnects by itself, logs the loss once, and hears later appends.
func TestListenerReconnects(t *testing.T) {
	t.Parallel()
	schema := newSchema(t)
	logs := &logRecorder{}
	db := openLoggedDB(t, schema, logs)
	h := newHeard()
	l := db.NewListener(h.onNotify)
	startListener(t, l)
	run := newTestRun(t, db.Workflows(), "alice", workflow.NewEvent{Event: workflow.EventRunCreated})
	h.waitFor(t, run.ID, 1)

	for i := range 2 {
		pid := l.BackendPID()
		execSQL(t, testURL(t), "SELECT pg_terminate_backend($1)", int64(pid))
		waitListening(t, l, pid)
		envs, err := db.Workflows().Append(t.Context(), workflow.AppendParams{RunID: run.ID, Events: []workflow.NewEvent{progressEvent(`{}`)}})
		if err != nil {
			t.Fatal(err)
		}
		h.waitFor(t, run.ID, envs[0].Seq)
		if n := logs.count(slog.LevelWarn, "connection lost"); n != i+1 {
			t.Errorf("after %d losses: %d warnings about them, want %d", i+1, n, i+1)
		}
	}
}

// TestListenerIgnoresMalformedPayloads: payloads that are not
// "<run id>:<seq>" are logged and skipped (an origin tag is the thread
// channel's only); the next good one is heard.
func TestListenerIgnoresMalformedPayloads(t *testing.T) {
	t.Parallel()
	logs := &logRecorder{}
	db := openLoggedDB(t, newSchema(t), logs)
	h := newHeard()
	startListener(t, db.NewListener(h.onNotify))
	id := uniqueID("malformed")
	bad := []string{id, id + ":", id + ":x", id + ":0", id + ":-1", id + ":3@ORIGIN"}
	for _, p := range bad {
		execSQL(t, testURL(t), "SELECT pg_notify($1, $2)", NotifyChannel, p)
	}
	execSQL(t, testURL(t), "SELECT pg_notify($1, $2)", NotifyChannel, id+"-good:5")
	h.waitFor(t, id+"-good", 5)
	h.mu.Lock()
	defer h.mu.Unlock()
	for runID, seqs := range h.got {
		if strings.HasPrefix(runID, id) && runID != id+"-good" {
			t.Errorf("malformed payload handed over as run %q, seqs %v", runID, seqs)
		}
	}
	if n := logs.count(slog.LevelWarn, "malformed"); n != len(bad) {
		t.Errorf("%d warnings about malformed payloads, want %d", n, len(bad))
	}
}
