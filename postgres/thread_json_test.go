package postgres

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/runstream/runstream/runevents"
)

// ScanThreadJSON hands out, for every view of a thread, the rows
// ListThreadEvents returns, each as the envelope Record.AppendJSON writes
// of it: free-form fields with multibyte and JSON's special characters,
// rows without an owner, writers in other zones; and fn's error as it is.
func TestScanThreadJSONMatchesRecords(t *testing.T) {
	db := openDB(t, newSchema(t))
	s, ctx := db.RunEvents(), t.Context()
	at := time.Date(2026, 12, 2, 7, 40, 0, 123456000, time.UTC)
	events := []runevents.NewEvent{
		{ThreadID: "t-1", RunID: "r_1", UserID: "zoë,12:34", EventType: "étape:3,4", Category: "κατηγορία", CreatedAt: at.In(time.FixedZone("", 5*3600+30*60)),
			Content: json.RawMessage(`{"text":"héllo, \"wörld\": <1>&2 \u2028 ✓"}`), Metadata: json.RawMessage(`{"k":"ü,:"}`)},
		{ThreadID: "t-1", RunID: "r-2", UserID: "u", EventType: "ai_message", Category: "message", Content: json.RawMessage(`12`), CreatedAt: at.In(time.FixedZone("", -8*3600))},
		{ThreadID: "t-1", RunID: "r-2", EventType: `x"y`, Category: "trace", Metadata: json.RawMessage(`{"task_id":"t"}`)},
		{ThreadID: "t-1", RunID: "r_1", UserID: "u", EventType: "human_message", Category: "message", Content: json.RawMessage(`"hi"`), CreatedAt: at},
		{ThreadID: "t-1", RunID: "r_1", UserID: "u", EventType: "human_message", Category: "message", CreatedAt: at.In(time.FixedZone("", 3600))},
	}
	if _, err := s.PutBatch(ctx, events); err != nil {
		t.Fatalf("PutBatch: %v", err)
	}
	for _, p := range []runevents.ListThreadEventsParams{
		{ThreadID: "t-1", Owner: runevents.AnyOwner, Limit: 10},
		{ThreadID: "t-1", Owner: runevents.AnyOwner, Limit: 2, AfterSeq: 1},
		{ThreadID: "t-1", Owner: runevents.AnyOwner, Limit: 10, AfterSeq: 1, BeforeSeq: 4},
		{ThreadID: "t-1", Owner: runevents.OwnedBy("u"), Limit: 10},
		{ThreadID: "t-1", Owner: runevents.AnyOwner, Limit: 10, RunID: "r_1"},
		{ThreadID: "t-1", Owner: runevents.AnyOwner, Limit: 10, Category: runevents.CategoryMessage},
		{ThreadID: "t-2", Owner: runevents.AnyOwner, Limit: 10},
	} {
		recs, err := s.ListThreadEvents(ctx, p)
		if err != nil {
			t.Fatalf("ListThreadEvents(%+v): %v", p, err)
		}
		var want, got []string
		for _, r := range recs {
			want = append(want, string(r.EventType)+" "+string(r.AppendJSON(nil)))
		}
		err = s.ScanThreadJSON(ctx, p, func(seq int64, eventType string, envelope []byte) error {
			got = append(got, eventType+" "+string(envelope))
			return nil
		})
		if err != nil {
			t.Fatalf("ScanThreadJSON(%+v): %v", p, err)
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("ScanThreadJSON(%+v):\n%s\nwant (ListThreadEvents):\n%s", p, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
	stop := errors.New("stop")
	calls := 0
	err := s.ScanThreadJSON(ctx, runevents.ListThreadEventsParams{ThreadID: "t-1", Owner: runevents.AnyOwner, Limit: 10}, func(int64, string, []byte) error {
		calls++
		return stop
	})
	if err != stop || calls != 1 {
		t.Errorf("ScanThreadJSON with a failing fn: %v after %d calls, want fn's error after 1", err, calls)
	}
}
