package sqlite

import (
	"path/filepath"
	"testing"

	"github.com/runstream/runstream/runevents"
)

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
