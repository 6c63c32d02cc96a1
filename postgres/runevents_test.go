package postgres

import (
	"encoding/json"
	"sync"
	"testing"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/runevents"
	"github.com/runstream/runstream/runeventstest"
)

// TestRunEventConformance runs the runeventstest suite, each test in a schema
// of its own; reopen closes the DB and opens a new one over the schema.
func TestRunEventConformance(t *testing.T) {
	testURL(t)
	runeventstest.RunEventStore(t, runeventstest.Harness{
		Open: func(t *testing.T) runevents.Store { return openDB(t, newSchema(t)).RunEvents() },
		OpenReopenable: func(t *testing.T) (runevents.Store, func() runevents.Store) {
			schema := newSchema(t)
			db := openDB(t, schema)
			return db.RunEvents(), func() runevents.Store {
				db.Close()
				return openDB(t, schema).RunEvents()
			}
		},
	})
}

// BenchmarkRunEventStore runs the shared benchmarks. The fsync probe is
// skipped: the data directory belongs to the server; PostgreSQL's own
// commit latency is part of every write number.
func BenchmarkRunEventStore(b *testing.B) {
	testURL(b)
	runeventstest.BenchmarkRunEventStore(b, runeventstest.BenchHarness{
		Open: func(b *testing.B) runevents.Store { return openDB(b, newSchema(b)).RunEvents() },
	})
}

// TestPutIfAbsentAcrossPools races PutIfAbsent and Put through two DBs
// (two pools, as two processes would have) on one thread: one row only.
func TestPutIfAbsentAcrossPools(t *testing.T) {
	schema := newSchema(t)
	stores := []*RunEventStore{openDB(t, schema).RunEvents(), openDB(t, schema).RunEvents()}
	ctx := t.Context()
	e := runevents.NewEvent{ThreadID: "t1", RunID: "r1", EventType: runevents.EventRunDelivery,
		Category: runevents.CategoryOutputs, UserID: "u"}
	var wg sync.WaitGroup
	var mu sync.Mutex
	created := 0
	seqs := map[int64]bool{}
	for i := range 40 {
		wg.Go(func() {
			s := stores[i%2]
			if _, err := s.Put(ctx, prepEvent("t1", "r1")); err != nil {
				t.Errorf("Put: %v", err)
			}
			rec, ok, err := s.PutIfAbsent(ctx, e)
			if err != nil {
				t.Errorf("PutIfAbsent: %v", err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			seqs[rec.Seq] = true
			if ok {
				created++
			}
		})
	}
	wg.Wait()
	if created != 1 || len(seqs) != 1 {
		t.Errorf("%d callers created, %d distinct rows returned; want 1 and 1", created, len(seqs))
	}
	rows, err := stores[0].ListEvents(ctx, runevents.ListEventsParams{ThreadID: "t1", RunID: "r1", Owner: runevents.AnyOwner, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 41 || rows[len(rows)-1].Seq != 41 {
		t.Errorf("%d rows, last seq %d; want 41 and 41", len(rows), rows[len(rows)-1].Seq)
	}
}

func prepEvent(thread, run string) runevents.NewEvent {
	return runevents.NewEvent{ThreadID: thread, RunID: run, EventType: runevents.EventRunStart, Category: runevents.CategoryTrace, UserID: "u"}
}

// TestUnstorableText covers text PostgreSQL cannot hold (NUL, invalid
// UTF-8): writes are refused as invalid arguments, reads find nothing.
func TestUnstorableText(t *testing.T) {
	db := openDB(t, newSchema(t))
	s, ctx := db.RunEvents(), t.Context()
	writes := []struct {
		name string
		edit func(*runevents.NewEvent)
	}{
		{"NUL in user id", func(e *runevents.NewEvent) { e.UserID = "a\x00b" }},
		{"invalid UTF-8 user id", func(e *runevents.NewEvent) { e.UserID = "a\xffb" }},
		{"NUL in event type", func(e *runevents.NewEvent) { e.EventType = "run\x00start" }},
		{"invalid UTF-8 content", func(e *runevents.NewEvent) { e.Content = json.RawMessage("\"a\xffb\"") }},
		{"invalid UTF-8 metadata", func(e *runevents.NewEvent) { e.Metadata = json.RawMessage("{\"k\":\"a\xffb\"}") }},
	}
	for _, w := range writes {
		e := prepEvent("t1", "r1")
		w.edit(&e)
		_, err := s.Put(ctx, e)
		wantInvalid(t, err, "Put with "+w.name)
		_, _, err = s.PutIfAbsent(ctx, e)
		wantInvalid(t, err, "PutIfAbsent with "+w.name)
		_, err = s.PutBatch(ctx, []runevents.NewEvent{prepEvent("t1", "r1"), e})
		wantInvalid(t, err, "PutBatch with "+w.name)
	}
	// A NUL escaped in JSON is storable, also as a task id.
	e := prepEvent("t1", "r1")
	e.Metadata = json.RawMessage(`{"task_id":"a\u0000b"}`)
	rec, err := s.Put(ctx, e)
	if err != nil || rec.Seq != 1 {
		t.Fatalf("Put with an escaped NUL task id: seq %d, %v; want seq 1", rec.Seq, err)
	}
	got, err := s.ListEvents(ctx, runevents.ListEventsParams{ThreadID: "t1", RunID: "r1", Owner: runevents.AnyOwner, TaskID: "a\x00b", Limit: 10})
	if err != nil || len(got) != 1 {
		t.Errorf("ListEvents by task id with a NUL: %d rows, %v; want 1", len(got), err)
	}
	nul := runevents.OwnedBy("a\x00b")
	if got, err := s.ListEvents(ctx, runevents.ListEventsParams{ThreadID: "t1", RunID: "r1", Owner: nul, Limit: 10}); err != nil || len(got) != 0 {
		t.Errorf("ListEvents as an unstorable owner: %d rows, %v; want none", len(got), err)
	}
	if got, err := s.ListEvents(ctx, runevents.ListEventsParams{ThreadID: "t1", RunID: "r1", Owner: runevents.AnyOwner,
		EventTypes: []runevents.EventType{"run\x00start"}, Limit: 10}); err != nil || len(got) != 0 {
		t.Errorf("ListEvents of an unstorable event type: %d rows, %v; want none", len(got), err)
	}
	if n, err := s.DeleteByThread(ctx, "t1", nul); err != nil || n != 0 {
		t.Errorf("DeleteByThread as an unstorable owner: %d, %v; want 0", n, err)
	}
}

func wantInvalid(t *testing.T, err error, what string) {
	t.Helper()
	if code := runstream.ErrorCodeOf(err); code != runstream.CodeInvalidArgument {
		t.Errorf("%s: %v, want CodeInvalidArgument", what, err)
	}
}

// TestClose closes the store while Puts are in flight: each Put either
// succeeds, and its row is stored, or is refused as unavailable; none is
// lost or left waiting. Calls after Close are refused as unavailable.
func TestClose(t *testing.T) {
	db := openDB(t, newSchema(t))
	s, ctx := db.RunEvents(), t.Context()
	var wg sync.WaitGroup
	errs := make([]error, 50)
	for i := range errs {
		wg.Go(func() { _, errs[i] = s.Put(ctx, prepEvent("t1", "r1")) })
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	wg.Wait()
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	stored := 0
	for i, err := range errs {
		switch runstream.ErrorCodeOf(err) {
		case "":
			stored++
		case runstream.CodeUnavailable:
		default:
			t.Errorf("Put %d during Close: %v", i, err)
		}
	}
	var rows int
	var last int64
	if err := db.pool.QueryRow(ctx, "SELECT count(*), coalesce(max(seq), 0) FROM run_events").Scan(&rows, &last); err != nil {
		t.Fatal(err)
	}
	if rows != stored || last != int64(stored) {
		t.Errorf("%d rows up to seq %d, want the %d acknowledged Puts", rows, last, stored)
	}
	_, err := s.Put(ctx, prepEvent("t1", "r1"))
	if runstream.ErrorCodeOf(err) != runstream.CodeUnavailable {
		t.Errorf("Put after Close: %v, want CodeUnavailable", err)
	}
	_, _, err = s.PutIfAbsent(ctx, prepEvent("t1", "r1"))
	if runstream.ErrorCodeOf(err) != runstream.CodeUnavailable {
		t.Errorf("PutIfAbsent after Close: %v, want CodeUnavailable", err)
	}
	db.Close() // reads fail alike once the pool is gone
	_, err = s.ListEvents(ctx, runevents.ListEventsParams{ThreadID: "t1", RunID: "r1", Owner: runevents.AnyOwner, Limit: 10})
	if runstream.ErrorCodeOf(err) != runstream.CodeUnavailable {
		t.Errorf("ListEvents after Close: %v, want CodeUnavailable", err)
	}
	_, err = s.DeleteByThread(ctx, "t1", runevents.AnyOwner)
	if runstream.ErrorCodeOf(err) != runstream.CodeUnavailable {
		t.Errorf("DeleteByThread after Close: %v, want CodeUnavailable", err)
	}
}
