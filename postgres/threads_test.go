package postgres

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/runevents"
	"github.com/runstream/runstream/runeventstest"
)

func TestRunStoreConformance(t *testing.T) {
	testURL(t)
	runeventstest.RunStoreSuite(t, func(t *testing.T) runevents.RunStore { return openDB(t, newSchema(t)).Runs() })
}

func TestThreadReaderConformance(t *testing.T) {
	testURL(t)
	runeventstest.ThreadReaderSuite(t, runeventstest.Harness{
		Open: func(t *testing.T) runevents.Store { return openDB(t, newSchema(t)).RunEvents() },
	})
}

func TestIdempotencyConformance(t *testing.T) {
	testURL(t)
	runeventstest.IdempotencySuite(t, func(t *testing.T) runevents.IdempotencyStore { return openDB(t, newSchema(t)).Idempotency() })
}

// TestIdempotencyAcrossInstances races Begins on one key through two DBs
// (two pools, as two processes would have): one reservation, every other
// Begin a conflict; the response completed through one DB replays through
// the other.
func TestIdempotencyAcrossInstances(t *testing.T) {
	schema := newSchema(t)
	stores := []*IdempotencyStore{openDB(t, schema).Idempotency(), openDB(t, schema).Idempotency()}
	hash := []byte("hash of the request")
	const perDB = 16
	var (
		mu         sync.Mutex
		reservedBy []int
		conflicts  int
		wg         sync.WaitGroup
		ctx        = t.Context()
	)
	for i, s := range stores {
		for range perDB {
			wg.Go(func() {
				resp, err := s.Begin(ctx, "alice", "k-race", hash)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil && resp == nil:
					reservedBy = append(reservedBy, i)
				case runstream.ErrorCodeOf(err) == runstream.CodeConflict:
					conflicts++
				default:
					t.Errorf("Begin = %+v, %v; want a reservation or CONFLICT", resp, err)
				}
			})
		}
	}
	wg.Wait()
	if len(reservedBy) != 1 || conflicts != 2*perDB-1 {
		t.Fatalf("%d reservations and %d conflicts, want 1 and %d", len(reservedBy), conflicts, 2*perDB-1)
	}
	completeVia, replayVia := reservedBy[0], 1-reservedBy[0]
	if err := stores[completeVia].Complete(ctx, "alice", "k-race", runevents.IdempotentResponse{Status: 201, Body: []byte(`{"ok":true}`)}); err != nil {
		t.Fatal(err)
	}
	resp, err := stores[replayVia].Begin(ctx, "alice", "k-race", hash)
	if err != nil || resp == nil || resp.Status != 201 || string(resp.Body) != `{"ok":true}` || !slices.Equal(resp.RequestHash, hash) {
		t.Errorf("Begin through the other DB = %+v, %v; want the stored 201 response", resp, err)
	}
}

// TestIdempotencyExpiry ages keys past their expiry: an expired key is
// reserved anew, even for another request, and Begin sweeps the other
// expired keys.
func TestIdempotencyExpiry(t *testing.T) {
	schema := newSchema(t)
	db := openDB(t, schema)
	s, ctx := db.Idempotency(), t.Context()
	for _, key := range []string{"done", "stuck", "other"} {
		if resp, err := s.Begin(ctx, "alice", key, []byte("h1")); err != nil || resp != nil {
			t.Fatalf("Begin(%s) = %+v, %v", key, resp, err)
		}
	}
	if err := s.Complete(ctx, "alice", "done", runevents.IdempotentResponse{Status: 200, Body: []byte(`1`)}); err != nil {
		t.Fatal(err)
	}
	execSQL(t, testURL(t), fmt.Sprintf(`UPDATE %s.idempotency_keys SET expires_at = now() - interval '1 second'`, schema))
	for _, key := range []string{"done", "stuck"} {
		if resp, err := s.Begin(ctx, "alice", key, []byte("h2")); err != nil || resp != nil {
			t.Errorf("Begin(%s) after expiry = %+v, %v; want a new reservation", key, resp, err)
		}
	}
	var left []string
	rows, err := db.pool.Query(ctx, "SELECT key FROM idempotency_keys ORDER BY key")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			t.Fatal(err)
		}
		left = append(left, k)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if want := []string{"done", "stuck"}; !slices.Equal(left, want) {
		t.Errorf("keys after the sweep: %v, want %v (the expired key other swept)", left, want)
	}
}

// TestThreadStoresRefuseUnstorableText refuses text PostgreSQL cannot
// hold with CodeInvalidArgument, before anything is written.
func TestThreadStoresRefuseUnstorableText(t *testing.T) {
	db := openDB(t, newSchema(t))
	runs, idem, ctx := db.Runs(), db.Idempotency(), t.Context()
	run := runevents.ThreadRun{ThreadID: "t1", RunID: "r1", OwnerID: "alice", Status: runevents.RunRunning}
	for name, change := range map[string]func(r *runevents.ThreadRun){
		"NUL in owner":          func(r *runevents.ThreadRun) { r.OwnerID = "al\x00ice" },
		"invalid UTF-8 model":   func(r *runevents.ThreadRun) { r.ModelName = "m\xff" },
		"invalid UTF-8 kind":    func(r *runevents.ThreadRun) { r.OperationKind = "k\xff" },
		"invalid UTF-8 in JSON": func(r *runevents.ThreadRun) { r.Metadata = json.RawMessage("{\"a\":\"\xff\"}") },
	} {
		r := run
		change(&r)
		_, err := runs.PutRun(ctx, r)
		wantInvalid(t, err, "PutRun with "+name)
	}
	for name, f := range map[string]runevents.Feedback{
		"NUL in comment":        {Comment: "a\x00b"},
		"invalid UTF-8 user":    {UserID: "u\xff"},
		"invalid UTF-8 rating":  {Rating: json.RawMessage("\"\xff\"")},
		"NUL in user":           {UserID: "u\x00"},
		"invalid UTF-8 comment": {Comment: "\xff"},
	} {
		f.ThreadID, f.RunID = "t1", "r1"
		if f.Rating == nil {
			f.Rating = json.RawMessage(`1`)
		}
		_, err := runs.PutFeedback(ctx, f)
		wantInvalid(t, err, "PutFeedback with "+name)
	}
	if got, err := runs.ListRuns(ctx, "t1", runevents.AnyOwner); err != nil || len(got) != 0 {
		t.Errorf("ListRuns after refused writes = %d rows, %v", len(got), err)
	}
	_, err := idem.Begin(ctx, "u\x00", "k1", []byte("h"))
	wantInvalid(t, err, "Begin with a NUL in the user id")
}

// TestPutRunKeepsMetadataBytes checks that metadata reads back as the
// compact bytes written: keys in their order, duplicates kept (jsonb would
// sort and drop them).
func TestPutRunKeepsMetadataBytes(t *testing.T) {
	db := openDB(t, newSchema(t))
	runs, ctx := db.Runs(), t.Context()
	const meta = `{"z":1,"a":{"y":"\u0000é","b":[1.50,2e3]},"z":2}`
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.FixedZone("", -5*3600))
	if _, err := runs.PutRun(ctx, runevents.ThreadRun{ThreadID: "t1", RunID: "r1", OwnerID: "alice", Status: runevents.RunSuccess,
		Metadata: json.RawMessage(" " + meta + " "), CreatedAt: at, UpdatedAt: at}); err != nil {
		t.Fatal(err)
	}
	got, err := runs.GetRun(ctx, "t1", "r1", runevents.OwnedBy("alice"))
	if err != nil {
		t.Fatal(err)
	}
	if string(got.Metadata) != meta {
		t.Errorf("metadata %s, want %s", got.Metadata, meta)
	}
	if _, off := got.CreatedAt.Zone(); off != -5*3600 || !got.CreatedAt.Equal(at) {
		t.Errorf("created_at %v, want %v in the writer's zone", got.CreatedAt, at)
	}
}

// TestThreadPagesReadInIndexOrder checks that every form of the
// ListThreadEvents query reads an index in seq order, without a sort.
func TestThreadPagesReadInIndexOrder(t *testing.T) {
	db := openDB(t, newSchema(t))
	s, ctx := db.RunEvents(), t.Context()
	var batch []runevents.NewEvent
	for i := range 3000 {
		e := prepEvent("t1", fmt.Sprintf("r%d", i%3))
		if i%10 == 0 {
			e.EventType, e.Category = runevents.EventLLMAIResponse, runevents.CategoryMessage
		}
		batch = append(batch, e)
	}
	if _, err := s.PutBatch(ctx, batch); err != nil {
		t.Fatal(err)
	}
	if _, err := db.pool.Exec(ctx, "ANALYZE run_events"); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		run      string
		category runevents.Category
		indexes  []string // any of them will do
	}{
		{"", "", []string{"run_events_pkey"}},
		{"", runevents.CategoryTrace, []string{"run_events_pkey"}},
		{"", runevents.CategoryMessage, []string{"run_events_thread_messages_seq"}},
		{"r1", "", []string{"run_events_thread_run_seq"}},
		{"r1", runevents.CategoryMessage, []string{"run_events_thread_run_seq", "run_events_thread_messages_seq"}},
	} {
		p := runevents.ListThreadEventsParams{ThreadID: "t1", RunID: tc.run, Category: tc.category, Owner: runevents.OwnedBy("u"), AfterSeq: 100, Limit: 50}
		sql, args, ok := listThreadQuery(p)
		if !ok {
			t.Fatalf("run %q category %q: no query", tc.run, tc.category)
		}
		plan := explain(t, db, sql, args)
		uses := slices.ContainsFunc(tc.indexes, func(index string) bool { return strings.Contains(plan, "Index Scan using "+index) })
		if strings.Contains(plan, "Sort") || !uses {
			t.Errorf("run %q category %q: plan sorts or does not read %v in order:\n%s", tc.run, tc.category, tc.indexes, plan)
		}
	}
}

// Rows that come back in text (the simple protocol, as a pooler that
// rewrites statements may make them) go through scanRecords, and give the
// envelopes that rows in binary give.
func TestScanEnvelopesOfTextRows(t *testing.T) {
	db := openDB(t, newSchema(t))
	s, ctx := db.RunEvents(), t.Context()
	at := time.Date(2026, 12, 2, 7, 50, 0, 123456000, time.FixedZone("", -5*3600))
	if _, err := s.PutBatch(ctx, []runevents.NewEvent{
		{ThreadID: "t1", RunID: "r1", UserID: "u", EventType: "x", Category: "trace", Content: json.RawMessage(`{"a":"<b>"}`), CreatedAt: at},
		{ThreadID: "t1", RunID: "r1", EventType: "y", Category: "message", CreatedAt: at.UTC()},
	}); err != nil {
		t.Fatal(err)
	}
	sql, args, _ := listThreadQuery(runevents.ListThreadEventsParams{ThreadID: "t1", Owner: runevents.AnyOwner, Limit: 10})
	envelopes := func(mode pgx.QueryExecMode) []string {
		rows, err := db.pool.Query(ctx, sql, append([]any{mode}, args...)...)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		if err := scanEnvelopes(rows, func(seq int64, eventType string, envelope []byte) error {
			out = append(out, fmt.Sprintf("%d %s %s", seq, eventType, envelope))
			return nil
		}); err != nil {
			t.Fatalf("scanEnvelopes (%v): %v", mode, err)
		}
		return out
	}
	binary, text := envelopes(pgx.QueryExecModeCacheStatement), envelopes(pgx.QueryExecModeSimpleProtocol)
	if len(binary) != 2 || fmt.Sprint(text) != fmt.Sprint(binary) {
		t.Errorf("text rows:\n%v\nbinary rows:\n%v", text, binary)
	}
}
