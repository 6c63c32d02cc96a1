package sqlite

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/runstream/runstream/runevents"
)

// TestReadsArePreparedOnce: a read query is prepared once and reused, per
// text, and texts past the bound still run.
func TestReadsArePreparedOnce(t *testing.T) {
	t.Parallel()
	s := openStore(t, Config{Path: filepath.Join(t.TempDir(), "runstream.db")})
	defer s.Close()
	for range 3 {
		for _, run := range []string{"", "r1"} {
			p := runevents.ListThreadEventsParams{ThreadID: "t1", Owner: runevents.AnyOwner, RunID: run, Limit: 10}
			if _, err := s.ListThreadEvents(t.Context(), p); err != nil {
				t.Fatal(err)
			}
		}
	}
	if n := len(s.db.reads.stmts); n != 2 {
		t.Errorf("two query shapes read three times each prepared %d statements, want 2", n)
	}

	c := newStmtCache(s.db.readers)
	defer c.close()
	for i := range maxCachedStmts + 5 {
		var got int
		if err := c.queryRow(t.Context(), fmt.Sprintf("SELECT ? + %d", i), 1).Scan(&got); err != nil || got != i+1 {
			t.Fatalf("query %d: %d, %v", i, got, err)
		}
	}
	if n := len(c.stmts); n != maxCachedStmts {
		t.Errorf("%d statements cached, want the bound %d", n, maxCachedStmts)
	}
}
