package memory_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/memory"
	"github.com/runstream/runstream/runevents"
	"github.com/runstream/runstream/runeventstest"
)

func TestRunEventStoreConformance(t *testing.T) {
	runeventstest.RunEventStore(t, runeventstest.Harness{
		Open: func(*testing.T) runevents.Store { return memory.NewRunEventStore() },
	})
}

// BenchmarkRunEventStore runs the shared benchmarks:
//
//	go test -run '^$' -bench . ./memory/
func BenchmarkRunEventStore(b *testing.B) {
	runeventstest.BenchmarkRunEventStore(b, runeventstest.BenchHarness{
		Open: func(*testing.B) runevents.Store { return memory.NewRunEventStore() },
	})
}

func TestRunEventStoreOptions(t *testing.T) {
	t.Parallel()
	now := time.Date(2025, 3, 4, 5, 6, 7, 891011121, time.FixedZone("", 2*3600))
	s := memory.NewRunEventStore(memory.WithClock(func() time.Time { return now }), memory.WithMaxTraceContent(100))
	t.Cleanup(func() { s.Close() })

	rec, err := s.Put(t.Context(), runevents.NewEvent{ThreadID: "t1", RunID: "r1", EventType: runevents.EventRunStart,
		Category: runevents.CategoryTrace, Content: json.RawMessage(`"` + strings.Repeat("x", 200) + `"`)})
	if err != nil {
		t.Fatal(err)
	}
	if want := now.UTC().Truncate(time.Microsecond); !rec.CreatedAt.Equal(want) || rec.CreatedAt.Location() != time.UTC {
		t.Errorf("created_at %s, want the clock's time in UTC %s", rec.CreatedAt, want)
	}
	if want := `"` + strings.Repeat("x", 100) + `"`; string(rec.Content) != want {
		t.Errorf("content of %d bytes, want it cut to 100 characters", len(rec.Content))
	}
	if !strings.Contains(string(rec.Metadata), `"original_byte_length":200`) {
		t.Errorf("metadata %s does not record the truncation", rec.Metadata)
	}
}

func TestRunEventStoreClosed(t *testing.T) {
	t.Parallel()
	s := memory.NewRunEventStore()
	e := runevents.NewEvent{ThreadID: "t1", RunID: "r1", EventType: runevents.EventRunStart, Category: runevents.CategoryTrace}
	if _, err := s.Put(t.Context(), e); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	owner := runevents.AnyOwner
	calls := map[string]func() error{
		"Put":         func() error { _, err := s.Put(t.Context(), e); return err },
		"PutBatch":    func() error { _, err := s.PutBatch(t.Context(), []runevents.NewEvent{e}); return err },
		"PutIfAbsent": func() error { _, _, err := s.PutIfAbsent(t.Context(), e); return err },
		"ListMessages": func() error {
			_, err := s.ListMessages(t.Context(), runevents.ListMessagesParams{ThreadID: "t1", Owner: owner, Limit: 1})
			return err
		},
		"ListMessagesByRun": func() error {
			_, err := s.ListMessagesByRun(t.Context(), runevents.ListMessagesByRunParams{ThreadID: "t1", RunID: "r1", Owner: owner, Limit: 1})
			return err
		},
		"ListEvents": func() error {
			_, err := s.ListEvents(t.Context(), runevents.ListEventsParams{ThreadID: "t1", RunID: "r1", Owner: owner, Limit: 1})
			return err
		},
		"LastVisibleAISeqByRun": func() error {
			_, err := s.LastVisibleAISeqByRun(t.Context(), runevents.LastVisibleAIParams{ThreadID: "t1", RunIDs: []string{"r1"}, Owner: owner})
			return err
		},
		"CountMessages":  func() error { _, err := s.CountMessages(t.Context(), "t1", owner); return err },
		"DeleteByThread": func() error { _, err := s.DeleteByThread(t.Context(), "t1", owner); return err },
		"DeleteByRun":    func() error { _, err := s.DeleteByRun(t.Context(), "t1", "r1", owner); return err },
	}
	for name, call := range calls {
		if code := runstream.ErrorCodeOf(call()); code != runstream.CodeUnavailable {
			t.Errorf("%s after Close: code %q, want %s", name, code, runstream.CodeUnavailable)
		}
	}
}

func TestRunEventStoreDurability(t *testing.T) {
	t.Parallel()
	var s runevents.Store = memory.NewRunEventStore()
	d, ok := s.(runevents.Durability)
	if !ok || !strings.Contains(d.Durability(), "none") {
		t.Errorf("Durability() does not say that nothing survives the process")
	}
}
