package jsonl

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/runstream/runstream/runevents"
)

// recordDiff describes how a differs from b, or returns "" when equal,
// comparing CreatedAt as an instant and a zone offset.
func recordDiff(a, b runevents.Record) string {
	_, offA := a.CreatedAt.Zone()
	_, offB := b.CreatedAt.Zone()
	if a.ThreadID != b.ThreadID || a.RunID != b.RunID || a.EventType != b.EventType || a.Category != b.Category ||
		!bytes.Equal(a.Content, b.Content) || !bytes.Equal(a.Metadata, b.Metadata) || a.Seq != b.Seq ||
		a.UserID != b.UserID || !a.CreatedAt.Equal(b.CreatedAt) || offA != offB {
		return fmt.Sprintf("%+v\n%+v", a, b)
	}
	return ""
}

func TestParsePlainTakesWrittenLines(t *testing.T) {
	t.Parallel()
	at := time.Date(2024, 6, 1, 12, 0, 0, 654321000, time.FixedZone("", -(3*3600+30*60)))
	for i, e := range []runevents.NewEvent{
		{Content: json.RawMessage(`"plain"`)},
		{Content: json.RawMessage("\"a\u2028b\u2029c\u0085\\n\\\"\""), Metadata: json.RawMessage(`{"caller":"middleware:x","n":[1,{"a":"}"}]}`), UserID: "ユーザー"},
		{Content: json.RawMessage(`{"k":[1,2.5e-7,null,true]}`), CreatedAt: at, UserID: "alice"},
		{Content: json.RawMessage(`12345678901234567890`)},
		{},
	} {
		e.ThreadID, e.RunID, e.EventType, e.Category = "t-1", "run_2", runevents.EventLLMAIResponse, runevents.CategoryMessage
		rec, err := runevents.Prepare(e, time.Now(), 0)
		if err != nil {
			t.Fatal(err)
		}
		rec.Seq = int64(i*1000 + 1)
		line, _ := rec.MarshalJSON()
		got, ok := parsePlain(line)
		if !ok {
			t.Errorf("parsePlain refused a line the store writes: %s", line)
			continue
		}
		if d := recordDiff(got, rec); d != "" {
			t.Errorf("parsePlain(%s):\n%s", line, d)
		}
	}
}

func TestDecodeFallsBack(t *testing.T) {
	t.Parallel()
	rec := runevents.Record{ThreadID: "t1", RunID: "r1", EventType: "a<b\"c", Category: "message", Content: json.RawMessage(`""`),
		Metadata: json.RawMessage(`{}`), Seq: 1, CreatedAt: time.Date(2024, 6, 1, 0, 0, 0, 0, time.UTC), UserID: "x\u2028y"}
	line, _ := rec.MarshalJSON()
	if _, ok := parsePlain(line); ok {
		t.Fatalf("parsePlain accepted escaped strings: %s", line)
	}
	got, err := decode(line, false)
	if err != nil {
		t.Fatal(err)
	}
	if d := recordDiff(got, rec); d != "" {
		t.Errorf("decode(%s):\n%s", line, d)
	}
}

func FuzzParsePlain(f *testing.F) {
	rec := runevents.Record{ThreadID: "t1", RunID: "r1", EventType: "llm.ai.response", Category: "message",
		Content: json.RawMessage(`{"a":["x",1]}`), Metadata: json.RawMessage(`{"caller":"c"}`), Seq: 42,
		CreatedAt: time.Date(2024, 6, 1, 12, 0, 0, 1000, time.FixedZone("", 3600)), UserID: "alice"}
	for _, r := range []runevents.Record{rec, {ThreadID: "t", RunID: "r", EventType: "e", Category: "c", Seq: 1}} {
		line, _ := r.MarshalJSON()
		f.Add(line)
	}
	for _, s := range []string{
		`{"thread_id":"t","run_id":"r","event_type":"e","category":"c","content":"","metadata":{},"seq":1,"created_at":"2024-06-01T12:00:00.000000+24:00"}`,
		`{"thread_id":"t","run_id":"r","event_type":"e","category":"c","content":"","metadata":{},"seq":01,"created_at":"2024-06-01T12:00:00.000000+00:00"}`,
		`{"thread_id":"t","run_id":"r","event_type":"e","category":"c","content":1,"metadata":{},"seq":9223372036854775808,"created_at":"2024-06-01T12:00:00.000000-00:00"}`,
		`{"thread_id": "t1", "run_id": "r1", "seq": 1}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		got, ok := parsePlain(line) // must not panic on any input
		if !ok || !json.Valid(line) {
			return
		}
		var want runevents.Record
		if err := json.Unmarshal(line, &want); err != nil {
			t.Fatalf("parsePlain accepted %q, which json.Unmarshal refuses: %v", line, err)
		}
		if d := recordDiff(got, want); d != "" {
			t.Errorf("parsePlain(%q) differs from json.Unmarshal:\n%s", line, d)
		}
	})
}
