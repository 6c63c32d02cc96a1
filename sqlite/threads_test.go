package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/runevents"
	"github.com/runstream/runstream/runeventstest"
)

func TestRunStoreConformance(t *testing.T) {
	t.Parallel()
	runeventstest.RunStoreSuite(t, func(t *testing.T) runevents.RunStore { return newDB(t, Config{}).Runs() })
}

func TestIdempotencyConformance(t *testing.T) {
	t.Parallel()
	runeventstest.IdempotencySuite(t, func(t *testing.T) runevents.IdempotencyStore { return newDB(t, Config{}).Idempotency() })
}

func TestThreadReaderConformance(t *testing.T) {
	t.Parallel()
	runeventstest.ThreadReaderSuite(t, runeventstest.Harness{
		Open: func(t *testing.T) runevents.Store {
			return openStore(t, Config{Path: filepath.Join(t.TempDir(), "runstream.db")})
		},
	})
}

// The thread reads search their tables through the index meant for them,
// never by a full scan, and need no sort.
func TestThreadQueriesUseIndexes(t *testing.T) {
	t.Parallel()
	db := newDB(t, Config{})
	owner := runevents.OwnedBy("u")
	thread := func(p runevents.ListThreadEventsParams) query {
		p.ThreadID, p.Limit = "t", 100
		return listThreadEventsQuery(p)
	}
	for _, tc := range []struct {
		name, table, index string
		q                  query
	}{
		{"ThreadEvents", "run_events", "sqlite_autoindex_run_events_1", thread(runevents.ListThreadEventsParams{Owner: runevents.AnyOwner, AfterSeq: 10})},
		{"ThreadEventsOwner", "run_events", "sqlite_autoindex_run_events_1", thread(runevents.ListThreadEventsParams{Owner: owner})},
		{"ThreadEventsTrace", "run_events", "sqlite_autoindex_run_events_1", thread(runevents.ListThreadEventsParams{Owner: owner, Category: runevents.CategoryTrace})},
		{"ThreadEventsMessages", "run_events", "run_events_messages", thread(runevents.ListThreadEventsParams{Owner: owner, Category: runevents.CategoryMessage, AfterSeq: 3})},
		{"ThreadEventsRun", "run_events", "run_events_run", thread(runevents.ListThreadEventsParams{Owner: owner, RunID: "r", AfterSeq: 3})},
		{"ThreadEventsRunMessages", "run_events", "run_events_run_messages", thread(runevents.ListThreadEventsParams{Owner: runevents.AnyOwner, RunID: "r", Category: runevents.CategoryMessage})},
		{"FindRun", "thread_runs", "thread_runs_run", findRunQuery("r", owner)},
		{"ListRuns", "thread_runs", "thread_runs_thread", listRunsQuery("t", runevents.AnyOwner)},
		{"ListRunsNewest", "thread_runs", "thread_runs_thread", listRunsNewestQuery("t", owner, 10, 20)},
		{"ListFeedback", "feedback", "sqlite_autoindex_feedback_2", listFeedbackQuery("t", []string{"r1", "r2"}, owner)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			plan := queryPlan(t, db, tc.q)
			joined := strings.Join(plan, "\n")
			t.Log(joined)
			if !strings.Contains(joined, "INDEX "+tc.index+" (") {
				t.Errorf("plan does not use %s:\n%s", tc.index, joined)
			}
			for _, line := range plan {
				if strings.HasPrefix(line, "SCAN "+tc.table) && !strings.Contains(line, "USING") {
					t.Errorf("full scan of %s: %q", tc.table, line)
				}
				if strings.Contains(line, "TEMP B-TREE") {
					t.Errorf("the rows are sorted instead of read in index order: %q", line)
				}
			}
		})
	}
}

// A run's timestamps read back with the writer's UTC offset, after a
// reopen too; the suite compares them only as instants.
func TestRunTimesKeepOffset(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "runstream.db")
	created := time.Date(2026, 3, 1, 12, 0, 0, 123456789, time.FixedZone("CET", 3600))
	updated := time.Date(2026, 3, 1, 8, 0, 0, 0, time.FixedZone("", -(5*3600+30*60)))
	run := runevents.ThreadRun{ThreadID: "t1", RunID: "r1", OwnerID: "alice", Status: runevents.RunSuccess, CreatedAt: created, UpdatedAt: updated}
	for _, pass := range []string{"put", "reopen"} {
		db, err := Open(t.Context(), Config{Path: path})
		if err != nil {
			t.Fatal(err)
		}
		var got runevents.ThreadRun
		if pass == "put" {
			got, err = db.Runs().PutRun(t.Context(), run)
		} else {
			got, err = db.Runs().GetRun(t.Context(), "t1", "r1", runevents.OwnedBy("alice"))
		}
		db.Close()
		if err != nil {
			t.Fatalf("%s: %v", pass, err)
		}
		wantCreated := "2026-03-01T12:00:00.123456+01:00"
		if c, u := got.CreatedAt.Format(time.RFC3339Nano), got.UpdatedAt.Format(time.RFC3339Nano); c != wantCreated || u != "2026-03-01T08:00:00-05:30" {
			t.Errorf("%s: created %s updated %s; want %s and 2026-03-01T08:00:00-05:30", pass, c, u, wantCreated)
		}
	}
}

// Runs, feedback and completed idempotency keys are in the file: a new DB
// on it sees them.
func TestThreadTablesSurviveReopen(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "runstream.db")
	alice := runevents.OwnedBy("alice")
	hash := []byte("hash")

	db, err := Open(ctx, Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	usage := runevents.Usage{TotalTokens: 7, ByModel: map[string]runevents.ModelUsage{"m": {TotalTokens: 7}}}
	if _, err := db.Runs().PutRun(ctx, runevents.ThreadRun{ThreadID: "t1", RunID: "r1", OwnerID: "alice", Status: runevents.RunSuccess, Usage: usage}); err != nil {
		t.Fatal(err)
	}
	fb, err := db.Runs().PutFeedback(ctx, runevents.Feedback{ThreadID: "t1", RunID: "r1", UserID: "alice", Rating: json.RawMessage(`1`)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Idempotency().Begin(ctx, "alice", "k1", hash); err != nil {
		t.Fatal(err)
	}
	if err := db.Idempotency().Complete(ctx, "alice", "k1", runevents.IdempotentResponse{Status: 201, Body: []byte(`{"ok":true}`)}); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Runs().GetRun(ctx, "t1", "r1", alice); runstream.ErrorCodeOf(err) != runstream.CodeUnavailable {
		t.Errorf("GetRun on a closed DB: %v, want UNAVAILABLE", err)
	}
	if _, err := db.Idempotency().Begin(ctx, "alice", "k2", hash); runstream.ErrorCodeOf(err) != runstream.CodeUnavailable {
		t.Errorf("Begin on a closed DB: %v, want UNAVAILABLE", err)
	}

	db = newDB(t, Config{Path: path})
	run, err := db.Runs().FindRun(ctx, "r1", alice)
	if err != nil || run.Usage.ByModel["m"].TotalTokens != 7 || run.Usage.TotalTokens != 7 {
		t.Errorf("FindRun after reopen = %+v, %v", run, err)
	}
	got, err := db.Runs().ListFeedback(ctx, "t1", []string{"r1"}, alice)
	if err != nil || got["r1"].ID != fb.ID {
		t.Errorf("ListFeedback after reopen = %+v, %v; want id %s", got, err, fb.ID)
	}
	resp, err := db.Idempotency().Begin(ctx, "alice", "k1", hash)
	if err != nil || resp == nil || resp.Status != 201 || string(resp.Body) != `{"ok":true}` || string(resp.RequestHash) != "hash" {
		t.Errorf("Begin after reopen = %+v, %v; want the stored response", resp, err)
	}
}

// Two DBs on one file have a writer connection each, as two processes
// would: the file's write lock makes exactly one Begin of all reserve the
// key, and each sees what the other completed.
func TestIdempotencyAcrossConnections(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "runstream.db")
	dbs := []*DB{newDB(t, Config{Path: path, BusyTimeout: time.Minute}), newDB(t, Config{Path: path, BusyTimeout: time.Minute})}
	hash := []byte("same request")
	var (
		wg                   sync.WaitGroup
		mu                   sync.Mutex
		reserved, conflicted []int
	)
	for i := range 50 {
		db := dbs[i%2]
		wg.Go(func() {
			resp, err := db.Idempotency().Begin(t.Context(), "alice", "k", hash)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil && resp == nil:
				reserved = append(reserved, i%2)
			case runstream.ErrorCodeOf(err) == runstream.CodeConflict:
				conflicted = append(conflicted, i%2)
			default:
				t.Errorf("Begin = %+v, %v; want a reservation or CONFLICT", resp, err)
			}
		})
	}
	wg.Wait()
	if len(reserved) != 1 || len(conflicted) != 49 {
		t.Fatalf("%d reservations and %d conflicts, want 1 and 49", len(reserved), len(conflicted))
	}
	holder, other := dbs[reserved[0]], dbs[1-reserved[0]]
	if err := other.Idempotency().Complete(t.Context(), "alice", "k", runevents.IdempotentResponse{Status: 200, Body: []byte(`1`)}); err != nil {
		t.Fatalf("Complete through the other DB: %v", err)
	}
	if resp, err := holder.Idempotency().Begin(t.Context(), "alice", "k", hash); err != nil || resp == nil || string(resp.Body) != "1" {
		t.Errorf("Begin through the holder after the other completed = %+v, %v; want the response", resp, err)
	}
}

// backdate moves the idempotency key's created_at before now by age.
func backdate(t *testing.T, db *DB, user, key string, age time.Duration) {
	t.Helper()
	err := db.write(t.Context(), func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, "UPDATE idempotency_keys SET created_at = ? WHERE user_id = ? AND key = ?",
			micros(time.Now().Add(-age)), user, key)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

func countKeys(t *testing.T, db *DB) int {
	t.Helper()
	var n int
	if err := db.readers.QueryRowContext(t.Context(), "SELECT count(*) FROM idempotency_keys").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// Keys older than IdempotencyTTL count as absent, completed or reserved,
// and any Begin sweeps them from the table.
func TestIdempotencyKeysExpire(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := newDB(t, Config{})
	s := db.Idempotency()
	old, fresh := []byte("old request"), []byte("new request")
	for _, key := range []string{"done", "stuck", "young"} {
		if _, err := s.Begin(ctx, "alice", key, old); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Complete(ctx, "alice", "done", runevents.IdempotentResponse{Status: 200, Body: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	backdate(t, db, "alice", "done", IdempotencyTTL+time.Minute)
	backdate(t, db, "alice", "stuck", IdempotencyTTL+time.Minute)
	backdate(t, db, "alice", "young", IdempotencyTTL-time.Hour)

	if resp, err := s.Begin(ctx, "alice", "done", fresh); err != nil || resp != nil {
		t.Errorf("Begin on an expired completed key = %+v, %v; want a new reservation", resp, err)
	}
	// The Begin above swept the expired "stuck" reservation.
	if n := countKeys(t, db); n != 2 {
		t.Errorf("%d keys after the sweep, want 2 (done and young)", n)
	}
	if resp, err := s.Begin(ctx, "alice", "stuck", fresh); err != nil || resp != nil {
		t.Errorf("Begin on an expired reservation = %+v, %v; want a new reservation", resp, err)
	}
	_, err := s.Begin(ctx, "alice", "young", old)
	wantCode(t, err, runstream.CodeConflict, "Begin on a reservation younger than the TTL")
}
