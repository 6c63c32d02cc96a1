package jsonl_test

import (
	"slices"
	"testing"

	"github.com/runstream/runstream/runevents"
	"github.com/runstream/runstream/runeventstest"
)

func TestThreadReaderConformance(t *testing.T) {
	t.Parallel()
	runeventstest.ThreadReaderSuite(t, runeventstest.Harness{
		Open: func(t *testing.T) runevents.Store { return openStore(t, t.TempDir()) },
	})
}

// A thread read merges the runs' indexes: rows that the original system
// filed in another run's file come once, in seq order, and so again after
// a reopen rebuilds the index.
func TestThreadEventsOfLegacyFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeLegacy(t, dir)
	cases := []struct {
		name string
		p    runevents.ListThreadEventsParams
		want []int64
		runs []string
	}{
		{"all", runevents.ListThreadEventsParams{}, []int64{1, 2, 3, 4}, []string{"r1", "r2", "r1", "r2"}},
		{"after seq", runevents.ListThreadEventsParams{AfterSeq: 2}, []int64{3, 4}, []string{"r1", "r2"}},
		{"limit", runevents.ListThreadEventsParams{Limit: 3}, []int64{1, 2, 3}, []string{"r1", "r2", "r1"}},
		{"run", runevents.ListThreadEventsParams{RunID: "r2"}, []int64{2, 4}, []string{"r2", "r2"}},
		{"trace", runevents.ListThreadEventsParams{Category: runevents.CategoryTrace}, []int64{4}, []string{"r2"}},
		{"messages", runevents.ListThreadEventsParams{Category: runevents.CategoryMessage, AfterSeq: 1}, []int64{2, 3}, []string{"r2", "r1"}},
	}
	for _, pass := range []string{"first open", "reopen"} {
		s := openStore(t, dir)
		for _, tc := range cases {
			p := tc.p
			p.ThreadID, p.Owner = "t1", runevents.AnyOwner
			if p.Limit == 0 {
				p.Limit = 100
			}
			recs, err := s.ListThreadEvents(t.Context(), p)
			if err != nil {
				t.Fatalf("%s, %s: %v", pass, tc.name, err)
			}
			runs := make([]string, len(recs))
			for i, r := range recs {
				runs[i] = r.RunID
			}
			if !slices.Equal(seqsOf(recs), tc.want) || !slices.Equal(runs, tc.runs) {
				t.Errorf("%s, %s: seqs %v of runs %v; want %v of %v", pass, tc.name, seqsOf(recs), runs, tc.want, tc.runs)
			}
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
