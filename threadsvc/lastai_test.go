package threadsvc_test

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"

	"github.com/runstream/runstream/internal/threadtest"
	"github.com/runstream/runstream/memory"
	"github.com/runstream/runstream/runevents"
	"github.com/runstream/runstream/threadsvc"
)

// messageReads counts the reads of one run's message rows.
type messageReads struct {
	*memory.RunEventStore
	calls atomic.Int64
}

func (m *messageReads) ListMessagesByRun(ctx context.Context, p runevents.ListMessagesByRunParams) ([]runevents.Record, error) {
	m.calls.Add(1)
	return m.RunEventStore.ListMessagesByRun(ctx, p)
}

// The newest page of a run whose last AI row is a subagent's, and whose
// only shown AI row is 300 rows further down: finding which row of the
// page carries the run's feedback reads the run's rows down to the page,
// not down to that AI row, which is on no page with these.
func TestFeedbackRowSearchStopsAtThePage(t *testing.T) {
	t.Parallel()
	events := &messageReads{RunEventStore: memory.NewRunEventStore()}
	svc := threadtest.ServiceOn(t, events)
	ctx := t.Context()
	human := runevents.NewEvent{ThreadID: "t1", RunID: "r1", EventType: runevents.EventLLMHumanInput,
		Content: json.RawMessage(`{"type":"human","content":"more"}`), Metadata: json.RawMessage(`{"caller":"lead_agent"}`)}
	batch := []runevents.NewEvent{aiRow("r1", "lead_agent", "", 1, 1)}
	for range 300 {
		batch = append(batch, human)
		if len(batch) == 50 {
			if _, err := svc.Append(ctx, "alice", "t1", batch); err != nil {
				t.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	batch = append(batch, aiRow("r1", "subagent:general-purpose", "", 1, 1))
	if _, err := svc.Append(ctx, "alice", "t1", batch); err != nil {
		t.Fatal(err)
	}
	events.calls.Store(0)
	page, err := svc.MessagePage(ctx, "alice", "t1", threadsvc.Cursors{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Data) != 10 {
		t.Fatalf("page of %d rows, want 10", len(page.Data))
	}
	if n := events.calls.Load(); n > 1 {
		t.Errorf("the page's feedback row was looked for with %d reads of the run's messages, want at most 1 (the rows down to the page)", n)
	}
}
