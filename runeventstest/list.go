package runeventstest

import (
	"fmt"
	"testing"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/runevents"
)

// seedGaps writes messages at seqs 1,3,5,7,9 of thread t1, alternating
// between runs ra and rb, with trace rows at the even seqs.
func seedGaps(t *testing.T, s runevents.Store) {
	t.Helper()
	var events []runevents.NewEvent
	for i := 1; i <= 10; i++ {
		run := []string{"ra", "rb"}[(i-1)/2%2]
		if i%2 == 1 {
			events = append(events, msg("t1", run))
		} else {
			events = append(events, trace("t1", run))
		}
	}
	putBatch(t, s, events)
}

var listMessagesTests = []test{
	{"Cursors", func(t *testing.T, s runevents.Store) {
		seedGaps(t, s)
		cases := []struct {
			before, after *int64
			limit         int
			want          []int64
		}{
			{nil, nil, 50, []int64{1, 3, 5, 7, 9}},
			{nil, nil, 2, []int64{7, 9}},
			{runevents.Seq(6), nil, 2, []int64{3, 5}},
			{runevents.Seq(5), nil, 5, []int64{1, 3}},
			{nil, runevents.Seq(4), 2, []int64{5, 7}},
			{nil, runevents.Seq(5), 5, []int64{7, 9}},
			{runevents.Seq(8), runevents.Seq(2), 3, []int64{3, 5, 7}},
			{runevents.Seq(8), runevents.Seq(2), 2, []int64{3, 5}},
			{runevents.Seq(1), nil, 5, nil},
			{nil, runevents.Seq(9), 5, nil},
			{runevents.Seq(3), runevents.Seq(5), 5, nil},
		}
		for _, c := range cases {
			got := listMessages(t, s, runevents.ListMessagesParams{ThreadID: "t1", Owner: asAlice, Limit: c.limit, BeforeSeq: c.before, AfterSeq: c.after})
			if !equalSeqs(seqs(got), c.want) {
				t.Errorf("before=%s after=%s limit=%d: seqs %v, want %v", ptr(c.before), ptr(c.after), c.limit, seqs(got), c.want)
			}
			for _, r := range got {
				if r.Category != runevents.CategoryMessage {
					t.Errorf("ListMessages returned a %s row", r.Category)
				}
			}
		}
	}},
	{"UnknownThread", func(t *testing.T, s runevents.Store) {
		seedGaps(t, s)
		if got := listMessages(t, s, runevents.ListMessagesParams{ThreadID: "t-none", Owner: asAlice, Limit: 10}); len(got) != 0 {
			t.Errorf("unknown thread: %d rows", len(got))
		}
	}},
	{"InvalidArguments", func(t *testing.T, s runevents.Store) {
		seedGaps(t, s)
		for _, p := range []runevents.ListMessagesParams{
			{ThreadID: "t1", Owner: asAlice, Limit: 0},
			{ThreadID: "t1", Owner: asAlice, Limit: -1},
			{ThreadID: "t.1", Owner: asAlice, Limit: 1},
			{ThreadID: "", Owner: asAlice, Limit: 1},
		} {
			_, err := s.ListMessages(t.Context(), p)
			wantCode(t, err, runstream.CodeInvalidArgument, fmt.Sprintf("ListMessages(thread %q, limit %d)", p.ThreadID, p.Limit))
		}
		for _, limit := range []int{0, -1} {
			_, err := s.ListMessagesByRun(t.Context(), runevents.ListMessagesByRunParams{ThreadID: "t1", RunID: "ra", Owner: asAlice, Limit: limit})
			wantCode(t, err, runstream.CodeInvalidArgument, fmt.Sprintf("ListMessagesByRun(limit %d)", limit))
			_, err = s.ListEvents(t.Context(), runevents.ListEventsParams{ThreadID: "t1", RunID: "ra", Owner: asAlice, Limit: limit})
			wantCode(t, err, runstream.CodeInvalidArgument, fmt.Sprintf("ListEvents(limit %d)", limit))
		}
		_, err := s.ListEvents(t.Context(), runevents.ListEventsParams{ThreadID: "t1", RunID: "r/a", Owner: asAlice, Limit: 1})
		wantCode(t, err, runstream.CodeInvalidArgument, "ListEvents with a bad run id")
		_, err = s.ListMessagesByRun(t.Context(), runevents.ListMessagesByRunParams{ThreadID: "t1", RunID: "", Owner: asAlice, Limit: 1})
		wantCode(t, err, runstream.CodeInvalidArgument, "ListMessagesByRun with an empty run id")
	}},
	{"BruteForce", func(t *testing.T, s runevents.Store) {
		rows := seedBrute(t, s)
		bruteForce(t, len(rows), func(after, before *int64, limit int) {
			got := listMessages(t, s, runevents.ListMessagesParams{ThreadID: "t1", Owner: asAlice, Limit: limit, BeforeSeq: before, AfterSeq: after})
			want := naiveWindow(rows, func(r runevents.Record) bool { return r.Category == runevents.CategoryMessage }, after, before, limit)
			if !equalSeqs(seqs(got), want) {
				t.Errorf("ListMessages after=%s before=%s limit=%d: %v, want %v", ptr(after), ptr(before), limit, seqs(got), want)
			}
		})
	}},
}

var listMessagesByRunTests = []test{
	{"BruteForce", func(t *testing.T, s runevents.Store) {
		rows := seedBrute(t, s)
		for _, run := range []string{"ra", "rb", "missing"} {
			bruteForce(t, len(rows), func(after, before *int64, limit int) {
				got := listMessagesByRun(t, s, runevents.ListMessagesByRunParams{ThreadID: "t1", RunID: run, Owner: asAlice, Limit: limit, BeforeSeq: before, AfterSeq: after})
				want := naiveWindow(rows, func(r runevents.Record) bool {
					return r.RunID == run && r.Category == runevents.CategoryMessage
				}, after, before, limit)
				if !equalSeqs(seqs(got), want) {
					t.Errorf("run %s after=%s before=%s limit=%d: %v, want %v", run, ptr(after), ptr(before), limit, seqs(got), want)
				}
				for _, r := range got {
					if r.RunID != run {
						t.Errorf("ListMessagesByRun(%s) returned a row of run %s", run, r.RunID)
					}
				}
			})
		}
	}},
	{"UnknownThread", func(t *testing.T, s runevents.Store) {
		seedGaps(t, s)
		got := listMessagesByRun(t, s, runevents.ListMessagesByRunParams{ThreadID: "t-none", RunID: "ra", Owner: asAlice, Limit: 10})
		if len(got) != 0 {
			t.Errorf("unknown thread: %d rows", len(got))
		}
	}},
}

// seedBrute writes 18 rows of two runs to thread t1: messages of both runs
// interleaved with rows of other categories, and returns them.
func seedBrute(t *testing.T, s runevents.Store) []runevents.Record {
	t.Helper()
	pattern := "MmMtMMmtomMMmtMmMM" // M: message of ra, m: message of rb, t: trace, o: outputs
	var events []runevents.NewEvent
	for i, c := range pattern {
		switch c {
		case 'M':
			events = append(events, msg("t1", "ra"))
		case 'm':
			events = append(events, msg("t1", "rb"))
		case 't':
			events = append(events, trace("t1", []string{"ra", "rb"}[i%2]))
		case 'o':
			events = append(events, ev("t1", "ra", runevents.EventRunEnd, runevents.CategoryOutputs, `"done"`))
		}
	}
	return putBatch(t, s, events)
}

// bruteForce calls check for every cursor in {none, 0, each seq, max+1}
// as after and as before, and every limit in {1, 2, 3, 50}.
func bruteForce(t *testing.T, maxSeq int, check func(after, before *int64, limit int)) {
	t.Helper()
	cursors := []*int64{nil}
	for i := 0; i <= maxSeq+1; i++ {
		cursors = append(cursors, runevents.Seq(int64(i)))
	}
	for _, after := range cursors {
		for _, before := range cursors {
			for _, limit := range []int{1, 2, 3, 50} {
				check(after, before, limit)
				if t.Failed() {
					return
				}
			}
		}
	}
}

// naiveWindow is the package doc's cursor rule, written out: the rows with
// after < seq < before, then the first limit of them when after is given,
// else the last limit.
func naiveWindow(rows []runevents.Record, keep func(runevents.Record) bool, after, before *int64, limit int) []int64 {
	var win []int64
	for _, r := range rows {
		if keep(r) && (after == nil || r.Seq > *after) && (before == nil || r.Seq < *before) {
			win = append(win, r.Seq)
		}
	}
	if len(win) > limit {
		if after != nil {
			win = win[:limit]
		} else {
			win = win[len(win)-limit:]
		}
	}
	return win
}

func ptr(p *int64) string {
	if p == nil {
		return "nil"
	}
	return fmt.Sprint(*p)
}
