package postgres

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/runevents"
)

// TestGroupCommit queues several writes before the committer runs: they
// must be written by one transaction (one xmin), each with its own answer.
// A request whose context ended is answered without being written.
func TestGroupCommit(t *testing.T) {
	db := openDB(t, newSchema(t))
	ctx := t.Context()
	hook, hooked := groupCommitHook(t, db)
	c := &committer{pool: db.pool, timeout: writeTimeout, queue: make(chan *writeRequest, 16), stopped: make(chan struct{}), groupCommit: hook}
	gone, cancel := context.WithCancel(ctx)
	cancel()

	var reqs []*writeRequest
	for i, thread := range []string{"t2", "t1", "t1", "t2", "t1"} {
		reqCtx := ctx
		if i == 2 {
			reqCtx = gone
		}
		n := 1 + i%2 // a mix of single events and batches of 2
		var recs []runevents.Record
		for range n {
			recs = append(recs, prepared(t, thread, "r1"))
		}
		r := &writeRequest{ctx: reqCtx, recs: recs, done: make(chan error, 1)}
		reqs = append(reqs, r)
		c.queue <- r
	}
	close(c.queue)
	c.run()

	want := map[string][]int64{}
	for i, r := range reqs {
		err := <-r.done
		if i == 2 {
			if runstream.ErrorCodeOf(err) != runstream.CodeUnavailable {
				t.Errorf("request with a cancelled context: %v, want CodeUnavailable", err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		for _, rec := range r.recs {
			want[rec.ThreadID] = append(want[rec.ThreadID], rec.Seq)
		}
	}
	// Seqs follow queue order within each thread.
	if !slices.Equal(want["t1"], []int64{1, 2, 3}) || !slices.Equal(want["t2"], []int64{1, 2, 3}) {
		t.Errorf("seqs t1 %v, t2 %v; want [1 2 3] each", want["t1"], want["t2"])
	}
	var txs, rows int
	if err := db.pool.QueryRow(ctx, "SELECT count(DISTINCT xmin::text), count(*) FROM run_events").Scan(&txs, &rows); err != nil {
		t.Fatal(err)
	}
	if txs != 1 || rows != 6 {
		t.Errorf("%d rows written by %d transactions, want 6 rows by 1", rows, txs)
	}
	// The transaction's records, in queue order, reach OnGroupCommit in
	// one call, once committed.
	calls, stored := hooked()
	if want := [][]string{{"t2:1", "t1:1", "t1:2", "t2:2", "t2:3", "t1:3"}}; !reflect.DeepEqual(calls, want) || !slices.Equal(stored, []int{6}) {
		t.Errorf("OnGroupCommit calls %v with %v rows stored, want %v with [6]", calls, stored, want)
	}
}

// TestGroupCommitFailureRetriesAlone makes one request of a group fail in
// the database: the others must still be written, in queue order, and
// only that request gets the error.
func TestGroupCommitFailureRetriesAlone(t *testing.T) {
	db := openDB(t, newSchema(t))
	ctx := t.Context()
	if _, err := db.pool.Exec(ctx, "ALTER TABLE run_events ADD CONSTRAINT no_poison CHECK (run_id <> 'poison')"); err != nil {
		t.Fatal(err)
	}
	hook, hooked := groupCommitHook(t, db)
	c := &committer{pool: db.pool, timeout: writeTimeout, queue: make(chan *writeRequest, 16), stopped: make(chan struct{}), groupCommit: hook}
	runs := []string{"r1", "poison", "r2"}
	var reqs []*writeRequest
	for _, run := range runs {
		r := &writeRequest{ctx: ctx, recs: []runevents.Record{prepared(t, "t1", run)}, done: make(chan error, 1)}
		reqs = append(reqs, r)
		c.queue <- r
	}
	close(c.queue)
	c.run()

	for i, r := range reqs {
		err := <-r.done
		switch {
		case runs[i] == "poison":
			if runstream.ErrorCodeOf(err) != runstream.CodeInternal || strings.Contains(runstream.ErrorMessage(err), "no_poison") {
				t.Errorf("poisoned request: code %s message %q, want CodeInternal without driver text", runstream.ErrorCodeOf(err), runstream.ErrorMessage(err))
			}
		case err != nil:
			t.Errorf("request %s failed with its group: %v", runs[i], err)
		}
	}
	got, err := db.RunEvents().ListEvents(ctx, runevents.ListEventsParams{ThreadID: "t1", RunID: "r2", Owner: runevents.AnyOwner, Limit: 10})
	if err != nil || len(got) != 1 {
		t.Fatalf("run r2: %d rows, %v; want 1", len(got), err)
	}
	// The failed attempts reserved no seq: r1 got 1, r2 got 2.
	if reqs[0].recs[0].Seq != 1 || got[0].Seq != 2 {
		t.Errorf("seqs r1 %d, r2 %d; want 1, 2", reqs[0].recs[0].Seq, got[0].Seq)
	}
	// Only what committed reaches OnGroupCommit: each request retried
	// alone, not the group that rolled back nor the poisoned request.
	if calls, _ := hooked(); !reflect.DeepEqual(calls, [][]string{{"t1:1"}, {"t1:2"}}) {
		t.Errorf("OnGroupCommit calls %v, want [[t1:1] [t1:2]]", calls)
	}
}

// TestGroupCommitUnknownOutcome times a group out in the database: the
// client cannot know whether it committed, so no request may be retried
// alone (it could be stored twice); each gets the error.
func TestGroupCommitUnknownOutcome(t *testing.T) {
	db := openDB(t, newSchema(t))
	ctx := t.Context()
	if _, err := db.pool.Exec(ctx, `CREATE FUNCTION slow() RETURNS trigger LANGUAGE plpgsql AS
		$$ BEGIN IF NEW.run_id = 'slow' THEN PERFORM pg_sleep(2); END IF; RETURN NEW; END $$;
		CREATE TRIGGER slow BEFORE INSERT ON run_events FOR EACH ROW EXECUTE FUNCTION slow()`); err != nil {
		t.Fatal(err)
	}
	c := &committer{pool: db.pool, timeout: 200 * time.Millisecond, queue: make(chan *writeRequest, 16), stopped: make(chan struct{})}
	var reqs []*writeRequest
	for _, run := range []string{"r1", "slow", "r2"} {
		r := &writeRequest{ctx: ctx, recs: []runevents.Record{prepared(t, "t1", run)}, done: make(chan error, 1)}
		reqs = append(reqs, r)
		c.queue <- r
	}
	close(c.queue)
	c.run()
	for i, r := range reqs {
		if err := <-r.done; runstream.ErrorCodeOf(err) != runstream.CodeUnavailable {
			t.Errorf("request %d: %v, want CodeUnavailable", i, err)
		}
	}
}

// groupCommitHook returns an OnGroupCommit function for a committer that
// records each call's records as "thread:seq" and the rows the database
// holds at that moment (read on another connection: a call before the
// commit would not see its rows), and the function returning them.
func groupCommitHook(t *testing.T, db *DB) (*runevents.GroupCommitHook, func() (calls [][]string, rows []int)) {
	var mu sync.Mutex
	var calls [][]string
	var rows []int
	f := func(recs []runevents.Record) {
		var n int
		if err := db.pool.QueryRow(context.Background(), "SELECT count(*) FROM run_events").Scan(&n); err != nil {
			t.Error(err)
		}
		var call []string
		for _, r := range recs {
			call = append(call, fmt.Sprintf("%s:%d", r.ThreadID, r.Seq))
		}
		mu.Lock()
		defer mu.Unlock()
		calls, rows = append(calls, call), append(rows, n)
	}
	var h runevents.GroupCommitHook
	h.Set(f)
	return &h, func() ([][]string, []int) {
		mu.Lock()
		defer mu.Unlock()
		return calls, rows
	}
}

func prepared(t *testing.T, thread, run string) runevents.Record {
	t.Helper()
	rec, err := runevents.Prepare(runevents.NewEvent{ThreadID: thread, RunID: run,
		EventType: runevents.EventRunStart, Category: runevents.CategoryTrace, UserID: "u"}, time.Now(), 0)
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

// TestGroupCommitOwned mixes, in one group, appends with and without the
// first-owner condition (PutBatchOwned): a refused request takes no seq
// and fails none of the others, a thread created earlier in the same
// group is not yet anyone's, and everything kept commits in one
// transaction.
func TestGroupCommitOwned(t *testing.T) {
	db := openDB(t, newSchema(t))
	ctx := t.Context()
	for _, thread := range []string{"old", "mine", "other"} {
		first := prepared(t, thread, "r1") // owned by "u"
		if err := db.runEvents.write(ctx, &writeRequest{ctx: ctx, recs: []runevents.Record{first}}); err != nil {
			t.Fatal(err)
		}
	}
	c := &committer{pool: db.pool, timeout: writeTimeout, queue: make(chan *writeRequest, 16), stopped: make(chan struct{})}
	cases := []struct {
		thread, owner string
		refused       bool
		seq           int64
	}{
		{"old", "bob", true, 0},
		{"new", "", false, 1},
		{"old", "u", false, 2},
		{"new", "u", true, 0}, // its first row is in this same group
		{"old", "", false, 3},
		{"empty", "bob", true, 0}, // a thread with no rows: nothing is written for it
		// Threads whose rows in the group all have the same owner
		// (appendRowsIfOwner): all kept, or none.
		{"mine", "u", false, 2},
		{"other", "bob", true, 0},
		{"mine", "u", false, 3},
		{"other", "bob", true, 0},
	}
	var reqs []*writeRequest
	for _, tc := range cases {
		r := &writeRequest{ctx: ctx, recs: []runevents.Record{prepared(t, tc.thread, "r1")}, owner: tc.owner, done: make(chan error, 1)}
		reqs = append(reqs, r)
		c.queue <- r
	}
	close(c.queue)
	c.run()

	for i, tc := range cases {
		r := reqs[i]
		if err := <-r.done; err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		if r.refused != tc.refused || (!tc.refused && r.recs[0].Seq != tc.seq) {
			t.Errorf("request %d (%s as %q): refused %v, seq %d; want refused %v, seq %d", i, tc.thread, tc.owner, r.refused, r.recs[0].Seq, tc.refused, tc.seq)
		}
	}
	var txs, rows int
	if err := db.pool.QueryRow(ctx, "SELECT count(DISTINCT xmin::text), count(*) FROM run_events WHERE seq > 1 OR thread_id = 'new'").Scan(&txs, &rows); err != nil {
		t.Fatal(err)
	}
	if txs != 1 || rows != 5 {
		t.Errorf("the group wrote %d rows in %d transactions, want 5 rows in 1", rows, txs)
	}
	for thread, want := range map[string]int64{"old": 3, "mine": 3, "other": 1} {
		var last int64
		if err := db.pool.QueryRow(ctx, "SELECT last_seq FROM run_event_threads WHERE thread_id = $1", thread).Scan(&last); err != nil || last != want {
			t.Errorf("the counter of thread %s = %d, %v; want %d (refused rows take no seq)", thread, last, err, want)
		}
	}

	// A refused PutBatchOwned on a thread with no rows leaves no counter row.
	_, err := db.runEvents.PutBatchOwned(ctx, "bob", []runevents.NewEvent{{ThreadID: "empty2", RunID: "r1",
		EventType: runevents.EventRunStart, Category: runevents.CategoryTrace, UserID: "bob"}})
	if err != runevents.ErrNotFirstOwner {
		t.Fatalf("PutBatchOwned on a thread with no rows: err = %v, want ErrNotFirstOwner", err)
	}
	var counters int
	if err := db.pool.QueryRow(ctx, "SELECT count(*) FROM run_event_threads WHERE thread_id IN ('empty', 'empty2')").Scan(&counters); err != nil || counters != 0 {
		t.Errorf("refused appends to threads with no rows left %d counter rows, %v; want 0", counters, err)
	}
}

// TestAppendStatementOfOwners checks which statement a thread's rows are
// appended with: appendRowsIfOwner when they all have one owner, since it
// costs PostgreSQL a quarter less than appendOwnedRows for 1,600 rows.
func TestAppendStatementOfOwners(t *testing.T) {
	rec := runevents.Record{ThreadID: "t", RunID: "r", UserID: "u", EventType: runevents.EventRunStart, Category: runevents.CategoryTrace}
	for _, tc := range []struct {
		name   string
		owners []string
		want   string
	}{
		{"no owner", []string{"", ""}, appendRows},
		{"one owner", []string{"u", "u", "u"}, appendRowsIfOwner},
		{"two owners", []string{"u", "v"}, appendOwnedRows},
		{"an owner, then none", []string{"u", ""}, appendOwnedRows},
		{"none, then an owner", []string{"", "u"}, appendOwnedRows},
	} {
		c := &columns{}
		for _, owner := range tc.owners {
			c.addOwned(&rec, owner)
		}
		b := &pgx.Batch{}
		c.queue(b, "t", "@origin")
		if got := b.QueuedQueries[0].SQL; got != tc.want {
			names := map[string]string{appendRows: "appendRows", appendRowsIfOwner: "appendRowsIfOwner", appendOwnedRows: "appendOwnedRows"}
			t.Errorf("%s: queued %s, want %s", tc.name, names[got], names[tc.want])
		}
		args := b.QueuedQueries[0].Arguments
		if args[len(args)-1] != "@origin" {
			t.Errorf("%s: the last argument is %v, want the origin tag", tc.name, args[len(args)-1])
		}
		if tc.want == appendRowsIfOwner && args[len(args)-2] != "u" {
			t.Errorf("%s: the owner argument is %v, want u", tc.name, args[len(args)-2])
		}
	}
}
