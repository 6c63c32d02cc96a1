package sqlite

import (
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/runstream/runstream/runevents"
)

// Rows keep the derived columns the SQL filters rely on.
func TestDerivedColumnsStored(t *testing.T) {
	t.Parallel()
	db := newDB(t, Config{})
	events := []runevents.NewEvent{
		{Metadata: json.RawMessage(`{"task_id":"task-1"}`)},
		{Metadata: json.RawMessage(`{"task_id":42,"caller":"middleware:guardrail"}`)},
		{Metadata: json.RawMessage(`{"caller":"lead_agent"}`)},
	}
	for i := range events {
		events[i].ThreadID, events[i].RunID, events[i].EventType, events[i].Category = "t", "r", runevents.EventLLMAIResponse, runevents.CategoryMessage
	}
	if _, err := db.RunEvents().PutBatch(t.Context(), events); err != nil {
		t.Fatal(err)
	}
	rows, err := db.readers.QueryContext(t.Context(), "SELECT task_id, middleware_caller FROM run_events ORDER BY seq")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got []any
	for rows.Next() {
		var task *string
		var middleware int
		if err := rows.Scan(&task, &middleware); err != nil {
			t.Fatal(err)
		}
		if task == nil {
			got = append(got, nil, middleware)
		} else {
			got = append(got, *task, middleware)
		}
	}
	want := []any{"task-1", 0, nil, 1, nil, 0}
	if len(got) != len(want) {
		t.Fatalf("rows %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("rows %v, want %v", got, want)
			break
		}
	}
}

func TestMaxTraceContentConfig(t *testing.T) {
	t.Parallel()
	db := newDB(t, Config{Path: filepath.Join(t.TempDir(), "runstream.db"), MaxTraceContent: 4})
	rec, err := db.RunEvents().Put(t.Context(), runevents.NewEvent{ThreadID: "t", RunID: "r",
		EventType: runevents.EventLLMError, Category: runevents.CategoryTrace, Content: json.RawMessage(`"abcdefgh"`)})
	if err != nil {
		t.Fatal(err)
	}
	if string(rec.Content) != `"abcd"` {
		t.Errorf("content %s, want the first 4 bytes", rec.Content)
	}
	var meta map[string]any
	if err := json.Unmarshal(rec.Metadata, &meta); err != nil || meta["content_truncated"] != true || meta["original_byte_length"] != float64(8) {
		t.Errorf("metadata %s, want content_truncated and original_byte_length 8", rec.Metadata)
	}
}

// parseCreatedAt must read what the writer wrote, exactly as time.Parse of
// the layout would, and keep the writer's offset.
func checkParseCreatedAt(t *testing.T, s string) {
	t.Helper()
	got, err := parseCreatedAt(s)
	want, wantErr := time.Parse(runevents.CreatedAtLayout, s)
	if (err != nil) != (wantErr != nil) {
		t.Fatalf("parseCreatedAt(%q) error %v, time.Parse error %v", s, err, wantErr)
	}
	if err != nil {
		return
	}
	_, gotOff := got.Zone()
	_, wantOff := want.Zone()
	if !got.Equal(want) || gotOff != wantOff || got.Format(runevents.CreatedAtLayout) != want.Format(runevents.CreatedAtLayout) {
		t.Errorf("parseCreatedAt(%q) = %v, time.Parse gives %v", s, got, want)
	}
	if name, _ := got.Zone(); got.Location() != time.UTC && name != "" {
		t.Errorf("parseCreatedAt(%q) is in zone %q, want UTC or an unnamed fixed zone", s, name)
	}
}

func TestParseCreatedAt(t *testing.T) {
	t.Parallel()
	for _, s := range []string{
		"2024-06-01T12:00:00.654321+08:00",
		"2024-06-01T12:00:00.000000+00:00",
		"1999-12-31T23:59:59.999999-09:30",
		"0001-01-01T00:00:00.000000+00:00",
		"2024-02-29T00:00:00.000000+00:00",
		"2023-02-29T00:00:00.000000+00:00", // no such day
		"2024-04-31T00:00:00.000000+01:00", // no such day
		"2024-06-01T24:00:00.000000+00:00",
		"2024-06-01T12:00:00.000000+24:00",
		"2024-06-01T12:00:00.000000Z",
		"2024-06-01T12:00:00+00:00",
		"2024-06-01 12:00:00.000000+00:00",
		"2024-06-01T12:00:00.00000a+00:00",
		"",
	} {
		checkParseCreatedAt(t, s)
	}
	// The zone of a written time comes back: UTC stays UTC.
	at := time.Date(2025, 3, 4, 5, 6, 7, 8000, time.UTC)
	if got, err := parseCreatedAt(at.Format(runevents.CreatedAtLayout)); err != nil || got.Location() != time.UTC || !got.Equal(at) {
		t.Errorf("round trip of %v: %v, %v", at, got, err)
	}
}

func FuzzParseCreatedAt(f *testing.F) {
	f.Add("2024-06-01T12:00:00.654321+08:00")
	f.Add("2023-02-29T00:00:00.000000-00:30")
	f.Fuzz(func(t *testing.T, s string) {
		checkParseCreatedAt(t, s)
	})
}
