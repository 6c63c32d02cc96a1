package jsonl_test

import (
	"testing"

	"github.com/runstream/runstream/jsonl"
	"github.com/runstream/runstream/runevents"
	"github.com/runstream/runstream/runeventstest"
)

func openStore(tb testing.TB, dir string) *jsonl.RunEventStore {
	tb.Helper()
	s, err := jsonl.Open(jsonl.Config{Dir: dir})
	if err != nil {
		tb.Fatalf("Open(%s): %v", dir, err)
	}
	return s
}

func TestRunEventStoreConformance(t *testing.T) {
	runeventstest.RunEventStore(t, runeventstest.Harness{
		Open: func(t *testing.T) runevents.Store { return openStore(t, t.TempDir()) },
		OpenReopenable: func(t *testing.T) (runevents.Store, func() runevents.Store) {
			dir := t.TempDir()
			var cur runevents.Store = openStore(t, dir)
			return cur, func() runevents.Store {
				if err := cur.Close(); err != nil {
					t.Fatalf("Close before reopen: %v", err)
				}
				cur = openStore(t, dir)
				return cur
			}
		},
	})
}

func BenchmarkRunEventStore(b *testing.B) {
	runeventstest.BenchmarkRunEventStore(b, runeventstest.BenchHarness{
		Open: func(b *testing.B) runevents.Store { return openStore(b, b.TempDir()) },
		Dir:  b.TempDir(),
	})
}
