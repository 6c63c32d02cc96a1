package runeventstest

import (
	"sync"
	"testing"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/runevents"
)

func delivery(thread, run, content string) runevents.NewEvent {
	return ev(thread, run, runevents.EventRunDelivery, runevents.CategoryOutputs, content)
}

var putIfAbsentTests = []test{
	{"CreatesOnce", func(t *testing.T, s runevents.Store) {
		put(t, s, trace("t1", "r1"))
		first, created, err := s.PutIfAbsent(t.Context(), delivery("t1", "r1", `{"presented":1}`))
		if err != nil || !created || first.Seq != 2 || string(first.Content) != `{"presented":1}` {
			t.Fatalf("first PutIfAbsent = seq %d created %v content %s, %v; want seq 2, created", first.Seq, created, first.Content, err)
		}
		put(t, s, trace("t1", "r1"))
		again, created, err := s.PutIfAbsent(t.Context(), delivery("t1", "r1", `{"presented":0}`))
		if err != nil || created {
			t.Fatalf("second PutIfAbsent: created %v, %v; want the existing row", created, err)
		}
		sameRecord(t, "second PutIfAbsent", again, first)
		if got := seqs(runRows(t, s, "t1", "r1", asAlice)); !equalSeqs(got, []int64{1, 2, 3}) {
			t.Errorf("rows %v after PutIfAbsent twice, want [1 2 3]", got)
		}
	}},
	{"ReturnsEarliest", func(t *testing.T, s runevents.Store) {
		// Rows written by Put count too; the earliest one is returned.
		want := put(t, s, delivery("t1", "r1", `{"presented":1}`))
		put(t, s, delivery("t1", "r1", `{"presented":2}`))
		got, created, err := s.PutIfAbsent(t.Context(), delivery("t1", "r1", `{"presented":0}`))
		if err != nil || created {
			t.Fatalf("PutIfAbsent: created %v, %v; want the earliest row", created, err)
		}
		sameRecord(t, "PutIfAbsent over two rows", got, want)
	}},
	{"KeyIsThreadRunType", func(t *testing.T, s runevents.Store) {
		base := delivery("t1", "r1", `"a"`)
		other := []runevents.NewEvent{
			base,
			delivery("t1", "r2", `"b"`), // other run
			delivery("t2", "r1", `"c"`), // other thread
			ev("t1", "r1", runevents.EventRunEnd, runevents.CategoryOutputs, `"d"`), // other type
		}
		for i, e := range other {
			rec, created, err := s.PutIfAbsent(t.Context(), e)
			if err != nil || !created || string(rec.Content) != string(e.Content) {
				t.Errorf("PutIfAbsent #%d (%s/%s %s): created %v, %v; want a new row", i, e.ThreadID, e.RunID, e.EventType, created, err)
			}
		}
	}},
	{"Concurrent50", func(t *testing.T, s runevents.Store) {
		type result struct {
			rec     runevents.Record
			created bool
			err     error
		}
		results := make([]result, 50)
		var wg sync.WaitGroup
		for i := range results {
			wg.Go(func() {
				if i%2 == 0 { // ordinary writers of the thread interleave
					if _, err := s.Put(t.Context(), trace("t1", "r1")); err != nil {
						results[i].err = err
						return
					}
				}
				rec, created, err := s.PutIfAbsent(t.Context(), delivery("t1", "r1", `"x"`))
				results[i] = result{rec, created, err}
			})
		}
		wg.Wait()
		creators := 0
		for i, r := range results {
			if r.err != nil {
				t.Fatalf("caller %d: %v", i, r.err)
			}
			if r.created {
				creators++
			}
			if r.rec.Seq != results[0].rec.Seq {
				t.Errorf("caller %d got seq %d, caller 0 got %d", i, r.rec.Seq, results[0].rec.Seq)
			}
		}
		if creators != 1 {
			t.Errorf("%d callers created the row, want exactly 1", creators)
		}
		rows := listEvents(t, s, runevents.ListEventsParams{ThreadID: "t1", RunID: "r1", Owner: asAlice, Limit: 100,
			EventTypes: []runevents.EventType{runevents.EventRunDelivery}})
		if len(rows) != 1 {
			t.Errorf("%d run.delivery rows stored, want 1", len(rows))
		}
	}},
	{"OtherOwnerConflicts", func(t *testing.T, s runevents.Store) {
		put(t, s, withUser(delivery("t1", "r1", `"alice's"`), alice))
		rec, created, err := s.PutIfAbsent(t.Context(), withUser(delivery("t1", "r1", `"bob's"`), bob))
		wantCode(t, err, runstream.CodeConflict, "PutIfAbsent by another owner")
		if created || rec.Seq != 0 || len(rec.Content) != 0 {
			t.Errorf("conflicting PutIfAbsent returned created %v and row %s; want neither", created, show(rec))
		}
		if got := runRows(t, s, "t1", "r1", runevents.AnyOwner); len(got) != 1 || got[0].UserID != alice {
			t.Errorf("rows after the conflict: %d, want alice's single row", len(got))
		}
	}},
}
