package runeventstest

import (
	"testing"

	"github.com/runstream/runstream/runevents"
)

// threadView is everything the reads return about one thread, for
// before/after comparisons.
type threadView struct {
	runs     map[string][]runevents.Record
	messages []runevents.Record
	count    int
	lastAI   map[string]int64
}

func viewThread(t *testing.T, s runevents.Store, thread string, runs []string, owner runevents.Owner) threadView {
	t.Helper()
	v := threadView{runs: map[string][]runevents.Record{}}
	for _, run := range runs {
		v.runs[run] = listEvents(t, s, runevents.ListEventsParams{ThreadID: thread, RunID: run, Owner: owner, Limit: 10000})
		byRun := listMessagesByRun(t, s, runevents.ListMessagesByRunParams{ThreadID: thread, RunID: run, Owner: owner, Limit: 10000})
		var want []runevents.Record
		for _, r := range v.runs[run] {
			if r.Category == runevents.CategoryMessage {
				want = append(want, r)
			}
		}
		sameRecords(t, "ListMessagesByRun vs ListEvents of "+thread+"/"+run, byRun, want)
	}
	v.messages = listMessages(t, s, runevents.ListMessagesParams{ThreadID: thread, Owner: owner, Limit: 10000})
	var err error
	if v.count, err = s.CountMessages(t.Context(), thread, owner); err != nil {
		t.Fatalf("CountMessages(%s): %v", thread, err)
	}
	if v.count != len(v.messages) {
		t.Errorf("CountMessages(%s) = %d, ListMessages returned %d", thread, v.count, len(v.messages))
	}
	if v.lastAI, err = s.LastVisibleAISeqByRun(t.Context(), runevents.LastVisibleAIParams{ThreadID: thread, RunIDs: runs, Owner: owner}); err != nil {
		t.Fatalf("LastVisibleAISeqByRun(%s): %v", thread, err)
	}
	return v
}

func (v threadView) rows() int {
	n := 0
	for _, rows := range v.runs {
		n += len(rows)
	}
	return n
}

// without returns v as it reads once run is deleted.
func (v threadView) without(run string) threadView {
	out := threadView{runs: map[string][]runevents.Record{}, lastAI: map[string]int64{}}
	for r, rows := range v.runs {
		if r != run {
			out.runs[r] = rows
		} else {
			out.runs[r] = nil
		}
	}
	for _, m := range v.messages {
		if m.RunID != run {
			out.messages = append(out.messages, m)
		}
	}
	out.count = len(out.messages)
	for r, seq := range v.lastAI {
		if r != run {
			out.lastAI[r] = seq
		}
	}
	return out
}

func sameView(t *testing.T, what string, got, want threadView) {
	t.Helper()
	for run, rows := range want.runs {
		sameRecords(t, what+": run "+run, got.runs[run], rows)
	}
	for run, rows := range got.runs {
		if _, ok := want.runs[run]; !ok && len(rows) > 0 {
			t.Errorf("%s: run %s has %d rows (seqs %v), want none", what, run, len(rows), seqs(rows))
		}
	}
	sameRecords(t, what+": messages", got.messages, want.messages)
	if got.count != want.count || !sameMap(got.lastAI, want.lastAI) {
		t.Errorf("%s: count %d last AI %v, want %d and %v", what, got.count, got.lastAI, want.count, want.lastAI)
	}
}

// seedTwoThreads writes runs ra and rb to threads t1 and t2; ra holds the
// lower seqs 1-3, rb the higher ones 4-6.
func seedTwoThreads(t *testing.T, s runevents.Store) {
	t.Helper()
	for _, thread := range []string{"t1", "t2"} {
		putBatch(t, s, []runevents.NewEvent{
			trace(thread, "ra"), msg(thread, "ra"), msg(thread, "ra"),
			trace(thread, "rb"), msg(thread, "rb"), delivery(thread, "rb", `"x"`),
		})
	}
}

// twoRuns are the runs seedTwoThreads writes.
var twoRuns = []string{"ra", "rb"}

var deleteTests = []test{
	{"CountMessages", func(t *testing.T, s runevents.Store) {
		seedTwoThreads(t, s)
		put(t, s, msg("t1", "rc"))
		for thread, want := range map[string]int{"t1": 4, "t2": 3, "t-none": 0} {
			n, err := s.CountMessages(t.Context(), thread, asAlice)
			if err != nil || n != want {
				t.Errorf("CountMessages(%s) = %d, %v; want %d", thread, n, err, want)
			}
		}
	}},
	{"ByRun", func(t *testing.T, s runevents.Store) {
		seedTwoThreads(t, s)
		other := viewThread(t, s, "t2", twoRuns, asAlice)
		before := viewThread(t, s, "t1", twoRuns, asAlice)
		n, err := s.DeleteByRun(t.Context(), "t1", "rb", asAlice)
		if err != nil || n != 3 {
			t.Fatalf("DeleteByRun(t1, rb) = %d, %v; want 3", n, err)
		}
		sameView(t, "thread t1 after deleting rb", viewThread(t, s, "t1", twoRuns, asAlice), before.without("rb"))
		sameView(t, "thread t2 after deleting t1/rb", viewThread(t, s, "t2", twoRuns, asAlice), other)
		// rb held the thread's highest seqs: they are not reused.
		if got := put(t, s, trace("t1", "rb")).Seq; got != 7 {
			t.Errorf("Put after DeleteByRun of the newest run: seq %d, want 7", got)
		}
		// A singleton of the deleted run can be written again.
		if _, created, err := s.PutIfAbsent(t.Context(), delivery("t1", "rb", `"y"`)); err != nil || !created {
			t.Errorf("PutIfAbsent after DeleteByRun: created %v, %v; want a new row", created, err)
		}
		for _, c := range []struct{ thread, run string }{{"t1", "rb-none"}, {"t-none", "ra"}} {
			if n, err := s.DeleteByRun(t.Context(), c.thread, c.run, asAlice); err != nil || n != 0 {
				t.Errorf("DeleteByRun(%s, %s) = %d, %v; want 0", c.thread, c.run, n, err)
			}
		}
	}},
	{"ByThread", func(t *testing.T, s runevents.Store) {
		seedTwoThreads(t, s)
		other := viewThread(t, s, "t2", twoRuns, asAlice)
		n, err := s.DeleteByThread(t.Context(), "t1", asAlice)
		if err != nil || n != 6 {
			t.Fatalf("DeleteByThread(t1) = %d, %v; want 6", n, err)
		}
		if after := viewThread(t, s, "t1", twoRuns, asAlice); after.rows() != 0 || len(after.messages) != 0 || after.count != 0 || len(after.lastAI) != 0 {
			t.Errorf("thread t1 after deletion: %d rows, %d messages, count %d, last AI %v", after.rows(), len(after.messages), after.count, after.lastAI)
		}
		sameView(t, "thread t2 after deleting t1", viewThread(t, s, "t2", twoRuns, asAlice), other)
		if got := put(t, s, trace("t1", "ra")).Seq; got != 7 {
			t.Errorf("Put after DeleteByThread: seq %d, want 7 (seqs are never reused)", got)
		}
		if n, err := s.DeleteByThread(t.Context(), "t-none", asAlice); err != nil || n != 0 {
			t.Errorf("DeleteByThread(unknown) = %d, %v; want 0", n, err)
		}
		if n, err := s.DeleteByThread(t.Context(), "t1", asAlice); err != nil || n != 1 {
			t.Errorf("second DeleteByThread = %d, %v; want 1", n, err)
		}
	}},
}
