package runeventstest

import (
	"fmt"
	"testing"
	"time"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/runevents"
)

// importRows returns rows of one thread with the given seqs: a message of
// alice, a trace of bob, a middleware row without owner, ... in turn over
// runs r1 and r2.
func importRows(t *testing.T, thread string, seqs ...int64) []runevents.ImportEvent {
	t.Helper()
	at := time.Date(2026, 3, 1, 10, 0, 0, 123456000, time.UTC)
	events := make([]runevents.ImportEvent, len(seqs))
	for i, seq := range seqs {
		run := []string{"r1", "r2"}[i%2]
		var e runevents.NewEvent
		switch i % 3 {
		case 0:
			e = withMeta(msg(thread, run), `{"caller":"lead_agent","branch_seed":true}`)
		case 1:
			e = withUser(trace(thread, run), bob)
		default:
			e = withUser(withMeta(ev(thread, run, "middleware:title", runevents.CategoryMiddleware, `{"name":"t"}`), `{"caller":"middleware:title"}`), "")
		}
		e.CreatedAt = at.Add(time.Duration(i) * time.Second)
		events[i] = runevents.ImportEvent{NewEvent: e, Seq: seq}
	}
	return events
}

// prepared returns events as every store keeps them.
func prepared(t *testing.T, events []runevents.ImportEvent) []runevents.Record {
	t.Helper()
	recs, err := runevents.PrepareImport(events, time.Now(), 0)
	if err != nil {
		t.Fatalf("PrepareImport: %v", err)
	}
	return recs
}

func importThread(t *testing.T, imp runevents.Importer, events []runevents.ImportEvent) {
	t.Helper()
	recs, err := imp.ImportThread(t.Context(), events)
	if err != nil {
		t.Fatalf("ImportThread: %v", err)
	}
	sameRecords(t, "ImportThread's records", recs, prepared(t, events))
}

// threadRows returns every row of a thread's runs r1 and r2, by seq.
func threadRows(t *testing.T, s runevents.Store, thread string) []runevents.Record {
	t.Helper()
	rows := append(runRows(t, s, thread, "r1", runevents.AnyOwner), runRows(t, s, thread, "r2", runevents.AnyOwner)...)
	for i := 1; i < len(rows); i++ { // insertion sort: a handful of rows
		for j := i; j > 0 && rows[j].Seq < rows[j-1].Seq; j-- {
			rows[j], rows[j-1] = rows[j-1], rows[j]
		}
	}
	return rows
}

var importTests = []test{
	{"RefusesBadSeqs", func(t *testing.T, s runevents.Store) {
		imp := implementation[runevents.Importer](t, s, "imports")
		for _, seqs := range [][]int64{{0, 1}, {2, 2}, {3, 1}} {
			_, err := imp.ImportThread(t.Context(), importRows(t, "t1", seqs...))
			wantCode(t, err, runstream.CodeInvalidArgument, fmt.Sprintf("ImportThread of seqs %v", seqs))
		}
		importThread(t, imp, importRows(t, "t1", 1)) // nothing was written
	}},
	{"KeepsSeqsOwnersAndTimes", func(t *testing.T, s runevents.Store) {
		imp := implementation[runevents.Importer](t, s, "imports")
		events := importRows(t, "t1", 2, 3, 7, 8, 11, 40)
		importThread(t, imp, events)
		sameRecords(t, "rows after the import", threadRows(t, s, "t1"), prepared(t, events))
		msgs := listMessages(t, s, runevents.ListMessagesParams{ThreadID: "t1", Owner: asAlice, Limit: 10})
		if got := seqs(msgs); !equalSeqs(got, []int64{2, 8}) {
			t.Errorf("alice's messages %v, want [2 8]", got)
		}
		if got := seqs(listMessages(t, s, runevents.ListMessagesParams{ThreadID: "t1", Owner: asAlice, Limit: 1, BeforeSeq: runevents.Seq(8)})); !equalSeqs(got, []int64{2}) {
			t.Errorf("messages before seq 8: %v, want [2]", got)
		}
		last, err := s.LastVisibleAISeqByRun(t.Context(), runevents.LastVisibleAIParams{ThreadID: "t1", RunIDs: []string{"r1", "r2"}, Owner: asAlice})
		if err != nil || last["r1"] != 2 || last["r2"] != 8 {
			t.Errorf("LastVisibleAISeqByRun = %v, %v; want r1:2 r2:8", last, err)
		}
		if h, ok := s.(runevents.ThreadHead); ok {
			if seq, err := h.LastThreadSeq(t.Context(), "t1"); err != nil || seq != 40 {
				t.Errorf("LastThreadSeq = %d, %v; want 40", seq, err)
			}
		}
		// Appends continue after the highest imported seq.
		if rec := put(t, s, msg("t1", "r3")); rec.Seq != 41 {
			t.Errorf("Put after the import got seq %d, want 41", rec.Seq)
		}
	}},
	{"AboveTheLastSeqOnly", func(t *testing.T, s runevents.Store) {
		imp := implementation[runevents.Importer](t, s, "imports")
		before := []runevents.Record{put(t, s, msg("t1", "r1")), put(t, s, msg("t1", "r1"))}
		_, err := imp.ImportThread(t.Context(), importRows(t, "t1", 2, 6))
		wantCode(t, err, runstream.CodeConflict, "ImportThread at a seq the thread has")
		sameRecords(t, "rows after the refused import", threadRows(t, s, "t1"), before)
		// Rows above the last seq are the thread's tail: imported.
		tail := importRows(t, "t1", 5, 6)
		importThread(t, imp, tail)
		sameRecords(t, "rows after the tail's import", threadRows(t, s, "t1"), append(before, prepared(t, tail)...))
		if rec := put(t, s, msg("t1", "r1")); rec.Seq != 7 {
			t.Errorf("Put after the tail got seq %d, want 7", rec.Seq)
		}
	}},
	{"DeletedSeqsCount", func(t *testing.T, s runevents.Store) {
		imp := implementation[runevents.Importer](t, s, "imports")
		put(t, s, msg("t1", "r1"))
		put(t, s, msg("t1", "r1"))
		if _, err := s.DeleteByThread(t.Context(), "t1", runevents.AnyOwner); err != nil {
			t.Fatalf("DeleteByThread: %v", err)
		}
		_, err := imp.ImportThread(t.Context(), importRows(t, "t1", 2))
		wantCode(t, err, runstream.CodeConflict, "ImportThread at a deleted seq")
		if rows := threadRows(t, s, "t1"); len(rows) != 0 {
			t.Errorf("rows after the refused import: seqs %v, want none", seqs(rows))
		}
		importThread(t, imp, importRows(t, "t1", 3))
	}},
	{"Twice", func(t *testing.T, s runevents.Store) {
		imp := implementation[runevents.Importer](t, s, "imports")
		events := importRows(t, "t1", 1, 2, 3)
		importThread(t, imp, events)
		_, err := imp.ImportThread(t.Context(), events)
		wantCode(t, err, runstream.CodeConflict, "the second ImportThread of a thread")
		_, err = imp.ImportThread(t.Context(), importRows(t, "t1", 3, 4))
		wantCode(t, err, runstream.CodeConflict, "an ImportThread overlapping the first")
		sameRecords(t, "rows after the second import", threadRows(t, s, "t1"), prepared(t, events))
		// Other threads are not affected.
		importThread(t, imp, importRows(t, "t2", 9))
	}},
}
