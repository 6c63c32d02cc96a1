package runeventstest

import (
	"fmt"
	"strings"
	"testing"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/runevents"
)

var putTests = []test{
	{"SeqPerThread", func(t *testing.T, s runevents.Store) {
		var gotA, gotB []int64
		for i := range 5 {
			gotA = append(gotA, put(t, s, trace("t-a", "r1")).Seq)
			if i%2 == 0 {
				gotB = append(gotB, put(t, s, msg("t-b", fmt.Sprintf("r%d", i))).Seq)
			}
		}
		if want := span(1, 5); !equalSeqs(gotA, want) {
			t.Errorf("thread t-a seqs %v, want %v", gotA, want)
		}
		if want := span(1, 3); !equalSeqs(gotB, want) {
			t.Errorf("thread t-b seqs %v, want %v", gotB, want)
		}
	}},
	{"ReturnsStoredRecord", func(t *testing.T, s runevents.Store) {
		e := withMeta(msg("t1", "r1"), `{"caller":"lead_agent"}`)
		rec := put(t, s, e)
		if rec.ThreadID != "t1" || rec.RunID != "r1" || rec.Seq != 1 || rec.EventType != e.EventType ||
			rec.Category != e.Category || string(rec.Content) != string(e.Content) ||
			string(rec.Metadata) != `{"caller":"lead_agent"}` || rec.UserID != alice {
			t.Errorf("Put returned %s", show(rec))
		}
		sameRecords(t, "ListEvents after Put", runRows(t, s, "t1", "r1", asAlice), []runevents.Record{rec})
	}},
	{"Batch50", func(t *testing.T, s runevents.Store) {
		put(t, s, trace("t1", "r0"))
		var events []runevents.NewEvent
		for range 50 {
			events = append(events, trace("t1", "r1"))
		}
		recs := putBatch(t, s, events)
		if got, want := seqs(recs), span(2, 51); !equalSeqs(got, want) {
			t.Errorf("batch seqs %v, want %v", got, want)
		}
		sameRecords(t, "ListEvents after PutBatch", runRows(t, s, "t1", "r1", asAlice), recs)
		if got := put(t, s, trace("t1", "r1")).Seq; got != 52 {
			t.Errorf("Put after batch: seq %d, want 52", got)
		}
	}},
	{"EmptyBatch", func(t *testing.T, s runevents.Store) {
		for _, events := range [][]runevents.NewEvent{nil, {}} {
			recs, err := s.PutBatch(t.Context(), events)
			if err != nil || len(recs) != 0 {
				t.Errorf("PutBatch(%#v) = %d records, %v; want none, nil", events, len(recs), err)
			}
		}
		if got := put(t, s, trace("t1", "r1")).Seq; got != 1 {
			t.Errorf("Put after empty batches: seq %d, want 1", got)
		}
	}},
	{"BatchSpansRuns", func(t *testing.T, s runevents.Store) {
		runs := []string{"ra", "rb", "ra", "rc", "rb", "rb"}
		var events []runevents.NewEvent
		for i, run := range runs {
			e := msg("t1", run)
			if i%2 == 1 {
				e = trace("t1", run)
			}
			events = append(events, e)
		}
		recs := putBatch(t, s, events)
		byRun := map[string][]runevents.Record{}
		for i, rec := range recs {
			if rec.Seq != int64(i+1) || rec.RunID != runs[i] {
				t.Errorf("record %d: seq %d run %s, want seq %d run %s", i, rec.Seq, rec.RunID, i+1, runs[i])
			}
			byRun[runs[i]] = append(byRun[runs[i]], rec)
		}
		for _, run := range []string{"ra", "rb", "rc"} {
			sameRecords(t, "ListEvents of run "+run, runRows(t, s, "t1", run, asAlice), byRun[run])
		}
	}},
	{"BatchSpansThreadsRefused", func(t *testing.T, s runevents.Store) {
		_, err := s.PutBatch(t.Context(), []runevents.NewEvent{trace("t1", "r1"), trace("t2", "r1")})
		wantCode(t, err, runstream.CodeInvalidArgument, "PutBatch over two threads")
		for _, thread := range []string{"t1", "t2"} {
			if got := runRows(t, s, thread, "r1", runevents.AnyOwner); len(got) != 0 {
				t.Errorf("thread %s has %d rows after a refused batch", thread, len(got))
			}
		}
		if got := put(t, s, trace("t1", "r1")).Seq; got != 1 {
			t.Errorf("Put after refused batch: seq %d, want 1 (no gaps)", got)
		}
	}},
	{"InvalidEventRefused", func(t *testing.T, s runevents.Store) {
		cases := []struct {
			name  string
			event func(runevents.NewEvent) runevents.NewEvent
		}{
			{"event type too long", func(e runevents.NewEvent) runevents.NewEvent {
				e.EventType = runevents.EventType(strings.Repeat("x", 33))
				return e
			}},
			{"empty event type", func(e runevents.NewEvent) runevents.NewEvent { e.EventType = ""; return e }},
			{"category too long", func(e runevents.NewEvent) runevents.NewEvent {
				e.Category = runevents.Category(strings.Repeat("c", 17))
				return e
			}},
			{"empty category", func(e runevents.NewEvent) runevents.NewEvent { e.Category = ""; return e }},
			{"bad run id", func(e runevents.NewEvent) runevents.NewEvent { e.RunID = "../escape"; return e }},
			{"empty run id", func(e runevents.NewEvent) runevents.NewEvent { e.RunID = ""; return e }},
			{"run id too long", func(e runevents.NewEvent) runevents.NewEvent { e.RunID = strings.Repeat("r", 65); return e }},
			{"metadata not an object", func(e runevents.NewEvent) runevents.NewEvent { e.Metadata = []byte(`["a"]`); return e }},
			{"metadata invalid JSON", func(e runevents.NewEvent) runevents.NewEvent { e.Metadata = []byte(`{"a":`); return e }},
			{"content invalid JSON", func(e runevents.NewEvent) runevents.NewEvent { e.Content = []byte(`{"a":1,}`); return e }},
			{"content bare word", func(e runevents.NewEvent) runevents.NewEvent { e.Content = []byte(`hello`); return e }},
		}
		for _, c := range cases {
			bad := c.event(trace("t1", "r1"))
			_, err := s.Put(t.Context(), bad)
			wantCode(t, err, runstream.CodeInvalidArgument, "Put with "+c.name)
			_, _, err = s.PutIfAbsent(t.Context(), bad)
			wantCode(t, err, runstream.CodeInvalidArgument, "PutIfAbsent with "+c.name)
			_, err = s.PutBatch(t.Context(), []runevents.NewEvent{trace("t1", "r1"), bad, trace("t1", "r1")})
			wantCode(t, err, runstream.CodeInvalidArgument, "PutBatch with "+c.name)
		}
		for _, thread := range []string{"", "thread.with.dot", strings.Repeat("x", 65)} {
			e := trace(thread, "r1")
			_, err := s.Put(t.Context(), e)
			wantCode(t, err, runstream.CodeInvalidArgument, fmt.Sprintf("Put to thread %q", thread))
			_, err = s.PutBatch(t.Context(), []runevents.NewEvent{e})
			wantCode(t, err, runstream.CodeInvalidArgument, fmt.Sprintf("PutBatch to thread %q", thread))
		}
		if got := runRows(t, s, "t1", "r1", runevents.AnyOwner); len(got) != 0 {
			t.Errorf("%d rows stored by refused writes", len(got))
		}
		if got := put(t, s, trace("t1", "r1")).Seq; got != 1 {
			t.Errorf("Put after refused writes: seq %d, want 1 (no gaps)", got)
		}
	}},
	{"OwnerStamped", func(t *testing.T, s runevents.Store) {
		for i, user := range []string{alice, bob, ""} {
			rec := put(t, s, withUser(trace("t1", "r1"), user))
			if rec.UserID != user {
				t.Errorf("Put by %q returned user_id %q", user, rec.UserID)
			}
			got := runRows(t, s, "t1", "r1", runevents.AnyOwner)
			if len(got) != i+1 || got[i].UserID != user {
				t.Errorf("row written by %q read back with user_id %q", user, got[len(got)-1].UserID)
			}
		}
		recs := putBatch(t, s, []runevents.NewEvent{withUser(trace("t1", "r2"), bob), withUser(trace("t1", "r2"), alice)})
		if recs[0].UserID != bob || recs[1].UserID != alice {
			t.Errorf("PutBatch stamped %q, %q; want per-row owners %q, %q", recs[0].UserID, recs[1].UserID, bob, alice)
		}
	}},
}
