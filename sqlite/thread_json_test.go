package sqlite

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/runstream/runstream/runevents"
)

// ScanThreadJSON hands out, for every view of a thread, the rows
// ListThreadEvents returns, each as the envelope Record.AppendJSON writes
// of it: free-form fields with multibyte characters and JSON's special
// characters, empty users, every filter.
func TestScanThreadJSONMatchesRecords(t *testing.T) {
	t.Parallel()
	s := openStore(t, Config{Path: filepath.Join(t.TempDir(), "runstream.db")})
	defer s.Close()
	events := []runevents.NewEvent{
		{ThreadID: "t-1", RunID: "r_1", UserID: "zoë,12:34", EventType: "étape:3,4", Category: "κατηγορία",
			Content: json.RawMessage(`{"text":"héllo, \"wörld\": <1>&2 \u2028 ✓"}`), Metadata: json.RawMessage(`{"k":"ü,:"}`)},
		{ThreadID: "t-1", RunID: "r-2", UserID: "u", EventType: "ai_message", Category: "message", Content: json.RawMessage(`12`)},
		{ThreadID: "t-1", RunID: "r-2", UserID: `a"b\c<d>`, EventType: `x"y`, Category: "trace", Metadata: json.RawMessage(`{"task_id":"t"}`)},
		{ThreadID: "t-1", RunID: "r_1", UserID: "u", EventType: "human_message", Category: "message", Content: json.RawMessage(`"hi"`)},
	}
	if _, err := s.PutBatch(t.Context(), events); err != nil {
		t.Fatalf("PutBatch: %v", err)
	}
	for _, p := range []runevents.ListThreadEventsParams{
		{ThreadID: "t-1", Owner: runevents.AnyOwner, Limit: 10},
		{ThreadID: "t-1", Owner: runevents.AnyOwner, Limit: 2, AfterSeq: 1},
		{ThreadID: "t-1", Owner: runevents.AnyOwner, Limit: 10, AfterSeq: 1, BeforeSeq: 4},
		{ThreadID: "t-1", Owner: runevents.OwnedBy("u"), Limit: 10},
		{ThreadID: "t-1", Owner: runevents.AnyOwner, Limit: 10, RunID: "r_1"},
		{ThreadID: "t-1", Owner: runevents.AnyOwner, Limit: 10, Category: runevents.CategoryMessage},
		{ThreadID: "t-1", Owner: runevents.AnyOwner, Limit: 10, Category: "trace"},
		{ThreadID: "t-2", Owner: runevents.AnyOwner, Limit: 10},
	} {
		recs, err := s.ListThreadEvents(t.Context(), p)
		if err != nil {
			t.Fatalf("ListThreadEvents(%+v): %v", p, err)
		}
		var want, got []string
		for _, r := range recs {
			want = append(want, string(r.EventType)+" "+string(r.AppendJSON(nil)))
		}
		err = s.ScanThreadJSON(t.Context(), p, func(seq int64, eventType string, envelope []byte) error {
			var r runevents.Record
			if err := json.Unmarshal(envelope, &r); err != nil || r.Seq != seq {
				t.Errorf("envelope of seq %d: %s (%v)", seq, envelope, err)
			}
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
}

// A row whose created_at is not as CreatedAtLayout writes it is decoded
// like ListThreadEvents decodes it: read alike when it can be (a zero
// offset written -00:00, which Format writes +00:00), refused alike when it
// cannot; and an error of fn ends the scan.
func TestScanThreadJSONRowsItCannotCopy(t *testing.T) {
	t.Parallel()
	s := openStore(t, Config{Path: filepath.Join(t.TempDir(), "runstream.db")})
	defer s.Close()
	if _, err := s.PutBatch(t.Context(), []runevents.NewEvent{{ThreadID: "t", RunID: "r", EventType: "x", Category: "y"}, {ThreadID: "t", RunID: "r", EventType: "x", Category: "y"}}); err != nil {
		t.Fatal(err)
	}
	p := runevents.ListThreadEventsParams{ThreadID: "t", Owner: runevents.AnyOwner, Limit: 10}
	stop := runevents.ErrNotFirstOwner // any error of fn's
	calls := 0
	if err := s.ScanThreadJSON(t.Context(), p, func(int64, string, []byte) error { calls++; return stop }); err != stop || calls != 1 {
		t.Fatalf("ScanThreadJSON with a failing fn: %v after %d calls, want fn's error after 1", err, calls)
	}
	if _, err := s.db.writer.ExecContext(t.Context(), `UPDATE run_events SET created_at = '2026-12-02T07:15:00.000001-00:00' WHERE seq = 2`); err != nil {
		t.Fatal(err)
	}
	recs, err := s.ListThreadEvents(t.Context(), p)
	if err != nil || len(recs) != 2 {
		t.Fatalf("ListThreadEvents: %d rows, %v", len(recs), err)
	}
	err = s.ScanThreadJSON(t.Context(), p, func(seq int64, _ string, envelope []byte) error {
		if want := recs[seq-1].AppendJSON(nil); string(envelope) != string(want) {
			t.Errorf("seq %d: %s\nwant (ListThreadEvents): %s", seq, envelope, want)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("ScanThreadJSON: %v", err)
	}
	if _, err := s.db.writer.ExecContext(t.Context(), `UPDATE run_events SET created_at = '2026-12-02 07:15:00' WHERE seq = 2`); err != nil {
		t.Fatal(err)
	}
	_, listErr := s.ListThreadEvents(t.Context(), p)
	scanErr := s.ScanThreadJSON(t.Context(), p, func(int64, string, []byte) error { return nil })
	if listErr == nil || scanErr == nil {
		t.Fatalf("a row with created_at %q: ListThreadEvents: %v, ScanThreadJSON: %v; want both to fail", "2026-12-02 07:15:00", listErr, scanErr)
	}
}
