package sqlite

import (
	"encoding/json"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/runstream/runstream/runevents"
)

// TestPackedRowsReadAsColumns checks that reads of packed rows
// (packedRecordColumns) give the records the nine columns give, with
// multibyte characters, separators and digits in every free-form field:
// the packed lengths are in bytes.
func TestPackedRowsReadAsColumns(t *testing.T) {
	t.Parallel()
	s := openStore(t, Config{Path: filepath.Join(t.TempDir(), "runstream.db")})
	defer s.Close()
	events := []runevents.NewEvent{
		{ThreadID: "t-1", RunID: "r_1", UserID: "zoë,12:34", EventType: "étape:3,4", Category: "κατηγορία",
			Content: json.RawMessage(`{"text":"héllo, wörld: 1,2:3 ✓"}`), Metadata: json.RawMessage(`{"k":"ü,:"}`)},
		{ThreadID: "t-1", RunID: "r-2", EventType: "x", Category: "y", Content: json.RawMessage(`12`)},
		{ThreadID: "t-1", RunID: "r-2", UserID: "u", EventType: "x", Category: "y"},
	}
	if _, err := s.PutBatch(t.Context(), events); err != nil {
		t.Fatalf("PutBatch: %v", err)
	}
	got, err := s.ListThreadEvents(t.Context(), runevents.ListThreadEventsParams{ThreadID: "t-1", Owner: runevents.AnyOwner, Limit: 10})
	if err != nil {
		t.Fatalf("ListThreadEvents: %v", err)
	}
	rows, err := s.db.reads.query(t.Context(), "SELECT "+recordColumns+" FROM run_events WHERE thread_id = 't-1' ORDER BY seq")
	if err != nil {
		t.Fatalf("query: %v", err)
	}
	defer rows.Close()
	var want []runevents.Record
	for rows.Next() {
		rec, err := scanRecord(rows)
		if err != nil {
			t.Fatalf("scanRecord: %v", err)
		}
		want = append(want, rec)
	}
	if len(want) != len(events) || !reflect.DeepEqual(got, want) {
		t.Fatalf("packed rows:\n%+v\nwant (nine columns):\n%+v", got, want)
	}
	if got[0].UserID != "zoë,12:34" || string(got[0].Metadata) != `{"k":"ü,:"}` || got[1].UserID != "" {
		t.Fatalf("fields read wrong: %+v", got[:2])
	}
}

func TestScanPackedRecordRefusesMalformedRows(t *testing.T) {
	t.Parallel()
	for _, packed := range []string{"", "1,2", "1,1,1,1,1,1,x:abcdefg", "1,1,1,1,1,1,1:ab", "1,1,1,1,1,40,1:abcdefghijklmnopqrstuvwxyz", "1,1,1,1,1,1,1,1:abcdefgh", "-1,1,1,1,1,1,1:abcdefg"} {
		var scratch string
		row := scanFunc(func(dest ...any) error {
			*dest[0].(*int64) = 7
			*dest[1].(*string) = packed
			return nil
		})
		if rec, err := scanPackedRecord(row, &scratch); err == nil {
			t.Errorf("scanPackedRecord(%q) = %+v, want an error", packed, rec)
		}
	}
}

// scanFunc is a row whose Scan is the function.
type scanFunc func(dest ...any) error

func (f scanFunc) Scan(dest ...any) error { return f(dest...) }
