package deerflowimport

import (
	"errors"
	"testing"
	"time"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/contracts"
)

func TestParseTime(t *testing.T) {
	t.Parallel()
	utc := time.Date(2026, 3, 1, 10, 0, 0, 500000000, time.UTC)
	for _, tt := range []struct {
		in   string
		want time.Time
	}{
		{"2026-03-01T10:00:00.500000+00:00", utc},                               // Python isoformat (JSONL)
		{"2026-03-01T12:00:00.5+02:00", utc},                                    // another offset
		{"2026-03-01 10:00:00.5+00", utc},                                       // PostgreSQL's text of timestamptz
		{"2026-03-01 10:00:00.500000", utc},                                     // SQLite: naive, UTC
		{"2026-03-01T10:00:00", time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)},   // naive, no fraction
		{"2026-03-01T10:00:00Z", time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)},  // RFC 3339
		{" 2026-03-01 10:00:00 ", time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)}, // spaces
	} {
		got, err := parseTime(tt.in)
		if err != nil || !got.Equal(tt.want) {
			t.Errorf("parseTime(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
	if got, _ := parseTime("2026-03-01T12:00:00+02:00"); got.Format(time.RFC3339) != "2026-03-01T12:00:00+02:00" {
		t.Errorf("an offset is not kept: %v", got)
	}
	for _, bad := range []string{"", "yesterday", "2026-03-01", "1700000000"} {
		if _, err := parseTime(bad); err == nil {
			t.Errorf("parseTime(%q) accepted", bad)
		}
	}
}

// TestSQLContent decodes content as DeerFlow's SQL store reads it (§1.6):
// JSON when a marker is truthy, the raw text otherwise; the markers go.
func TestSQLContent(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name, content, meta, wantContent, wantMeta string
	}{
		{"object", `{"type":"ai","content":"x"}`, `{"caller":"lead_agent","content_is_json":true,"content_is_dict":true}`, `{"type":"ai","content":"x"}`, `{"caller":"lead_agent"}`},
		{"list", `[{"type":"text"}]`, `{"content_is_json":true}`, `[{"type":"text"}]`, `{}`},
		{"legacy dict marker alone", `{"a":1}`, `{"content_is_dict":1}`, `{"a":1}`, `{}`},
		{"string", `plain text`, `{"error_type":"E"}`, `"plain text"`, `{"error_type":"E"}`},
		{"JSON-looking string without marker", `{"a":1}`, `{}`, `"{\"a\":1}"`, `{}`},
		{"false marker", `[1]`, `{"content_is_json":false}`, `"[1]"`, `{}`},
		{"marker on a truncated trace", `{"cut`, `{"content_is_json":true,"content_truncated":true}`, `"{\"cut"`, `{"content_truncated":true}`},
		{"null metadata", `x`, `null`, `"x"`, `{}`},
		{"empty content", ``, `{}`, `""`, `{}`},
	} {
		content, meta, err := sqlContent(tt.content, tt.meta)
		if err != nil || string(content) != tt.wantContent || string(meta) != tt.wantMeta {
			t.Errorf("%s: sqlContent = %s %s, %v; want %s %s", tt.name, content, meta, err, tt.wantContent, tt.wantMeta)
		}
	}
	if _, _, err := sqlContent("x", `[1]`); err == nil {
		t.Error("metadata that is not an object accepted")
	}
}

func TestDecodeLine(t *testing.T) {
	t.Parallel()
	ev, owned, err := decodeLine([]byte(`{"thread_id":"t1","run_id":"r1","event_type":"run.end","category":"outputs","content":["x"],"metadata":null,"seq":4,"created_at":"2026-03-01T10:00:00+00:00"}`))
	if err != nil || owned || ev.Seq != 4 || string(ev.Content) != `["x"]` || string(ev.Metadata) != `{}` || ev.ThreadID != "t1" || ev.EventType != "run.end" {
		t.Errorf("decodeLine = %+v %v, %v", ev, owned, err)
	}
	for _, bad := range []string{
		`{"thread_id":"t1"`,
		`{"thread_id":"t1","run_id":"r1","event_type":"x","category":"c","seq":0,"created_at":"2026-03-01T10:00:00Z"}`,
		`{"thread_id":"t1","run_id":"r1","event_type":"x","category":"c","created_at":"2026-03-01T10:00:00Z"}`,
		`{"thread_id":"t1","run_id":"r1","event_type":"x","category":"c","seq":1}`,
		`{"run_id":"r1","event_type":"x","category":"c","seq":1,"created_at":"2026-03-01T10:00:00Z"}`,
	} {
		if _, _, err := decodeLine([]byte(bad)); err == nil {
			t.Errorf("decodeLine(%s) accepted", bad)
		}
	}
}

func TestDedupSeqs(t *testing.T) {
	t.Parallel()
	var got []Problem
	rows := []Row{{Loc: "a:1"}, {Loc: "b:1"}, {Loc: "a:2"}}
	rows[0].Event.Seq, rows[1].Event.Seq, rows[2].Event.Seq = 2, 1, 2
	out := dedupSeqs(rows, func(p Problem) { got = append(got, p) })
	if len(out) != 2 || out[0].Loc != "b:1" || out[1].Loc != "a:1" || len(got) != 1 || got[0].Loc != "a:2" {
		t.Errorf("dedupSeqs = %+v, problems %v; want b:1, a:1 and a:2 reported", out, got)
	}
}

func TestRefused(t *testing.T) {
	t.Parallel()
	err := (&runstream.Error{Code: runstream.CodeValidationFailed}).WithDetail("problems", []contracts.Problem{
		{Path: "/events/0/event_type", Message: "unknown"}, {Path: "/events/2/content/type", Message: "bad"}, {Path: "/events/2", Message: "worse"}})
	got := refused(err)
	if len(got) != 2 || got[0] != "/event_type: unknown" || got[2] != "/content/type: bad; worse" {
		t.Errorf("refused = %v", got)
	}
	big := runstream.Errorf(runstream.CodePayloadTooLarge, "events[3] has 9 bytes of content and metadata, the limit is 4").WithDetail("index", 3)
	if got := refused(big); got[3] != "the row has 9 bytes of content and metadata, the limit is 4 (--max-row-bytes)" {
		t.Errorf("refused(too large) = %v", got)
	}
	if refused(errors.New("disk full")) != nil {
		t.Error("a store failure read as refused rows")
	}
}
