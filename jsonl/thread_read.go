package jsonl

import (
	"container/heap"
	"context"
	"sort"

	"github.com/runstream/runstream/runevents"
)

var _ runevents.ThreadReader = (*RunEventStore)(nil)

// ListThreadEvents returns the thread's durable rows with seq > p.AfterSeq
// (and < p.BeforeSeq when it is positive) visible to p.Owner (of run p.RunID and category p.Category when given),
// ascending, at most p.Limit.
//
// The index has no thread-wide list of every row, only one per run and
// one of message rows. A run filter or the message category reads one of
// those lists: a binary search for the cursor, then the rows scanned until
// Limit are kept. Otherwise the runs' lists are merged by seq: every row
// scanned costs O(log runs), and the scan stops at the Limit-th row kept.
// Only the returned lines are read from the files.
func (s *RunEventStore) ListThreadEvents(_ context.Context, p runevents.ListThreadEventsParams) ([]runevents.Record, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	after := runevents.Seq(p.AfterSeq)
	var before *int64
	if p.BeforeSeq > 0 {
		before = runevents.Seq(p.BeforeSeq)
	}
	return s.read(p.ThreadID, func(t *thread) []entry {
		owned := t.ownedBy(p.Owner)
		keep := func(e *entry) bool {
			return (p.Category == "" || t.attrs[e.attr].category == p.Category) && owned(e)
		}
		switch {
		case p.RunID != "":
			return window(t.runs[p.RunID], t.visible, after, before, p.Limit, keep)
		case p.Category == runevents.CategoryMessage:
			return window(t.messages, t.visible, after, before, p.Limit, keep)
		}
		last := t.visible
		if before != nil {
			last = min(last, *before-1)
		}
		return mergeRuns(t.runs, last, p.AfterSeq, p.Limit, keep)
	})
}

// mergeRuns returns, ascending by seq, the first limit rows accepted by
// keep among the rows of every run with after < seq <= through (the last
// durable seq, or less). Each run's rows are ascending by seq and no seq is
// in two runs.
func mergeRuns(runs map[string][]entry, through, after int64, limit int, keep func(*entry) bool) []entry {
	h := make(runHeads, 0, len(runs))
	for _, rows := range runs {
		lo := sort.Search(len(rows), func(i int) bool { return rows[i].seq > after })
		hi := sort.Search(len(rows), func(i int) bool { return rows[i].seq > through })
		if lo < hi {
			h = append(h, rows[lo:hi])
		}
	}
	heap.Init(&h)
	var out []entry
	for len(out) < limit && len(h) > 0 {
		e := &h[0][0]
		if keep(e) {
			out = append(out, *e)
		}
		if h[0] = h[0][1:]; len(h[0]) == 0 {
			heap.Pop(&h)
		} else {
			heap.Fix(&h, 0)
		}
	}
	return out
}

// runHeads is a min-heap of the unread rows of each run, by the seq of
// their first row. No element is empty.
type runHeads [][]entry

func (h runHeads) Len() int           { return len(h) }
func (h runHeads) Less(i, j int) bool { return h[i][0].seq < h[j][0].seq }
func (h runHeads) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *runHeads) Push(x any)        { *h = append(*h, x.([]entry)) }
func (h *runHeads) Pop() any {
	old := *h
	last := old[len(old)-1]
	*h = old[:len(old)-1]
	return last
}
