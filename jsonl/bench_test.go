package jsonl

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/runstream/runstream/runevents"
)

// BenchmarkPutBatch100CPU is PutBatch of 100 300-byte events with fsync
// replaced by a no-op: the CPU cost of the store, to read the shared
// PutBatch100 benchmark against (that one adds the disk's fsync latency).
func BenchmarkPutBatch100CPU(b *testing.B) {
	s, err := Open(Config{Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	s.io.sync = func(*os.File) error { return nil }
	content := json.RawMessage(`"` + strings.Repeat("lorem ipsum ", 20) + `"`)
	events := make([]runevents.NewEvent, 100)
	for i := range events {
		events[i] = runevents.NewEvent{ThreadID: "t1", RunID: "r1", UserID: "alice", EventType: runevents.EventSubagentStep,
			Category: runevents.CategorySubagent, Content: content, Metadata: json.RawMessage(`{"task_id":"task-1","message_index":7}`)}
	}
	for b.Loop() {
		if _, err := s.PutBatch(b.Context(), events); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*len(events))/b.Elapsed().Seconds(), "events/s")
}
