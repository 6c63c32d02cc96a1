package streams_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/runstream/runstream/live"
	"github.com/runstream/runstream/runevents"
	"github.com/runstream/runstream/sse"
	"github.com/runstream/runstream/streams"
)

func TestThreadStreamShows(t *testing.T) {
	t.Parallel()
	rec := runevents.Record{ThreadID: "t1", RunID: "r1", UserID: "alice", Seq: 3, EventType: runevents.EventRunStart,
		Category: runevents.CategoryTrace, Content: json.RawMessage(`{}`), Metadata: json.RawMessage(`{}`)}
	ev, err := streams.ThreadFrame(rec)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		view streams.ThreadStream
		want bool
	}{
		{streams.ThreadStream{ThreadID: "t1"}, true},
		{streams.ThreadStream{ThreadID: "t1", UserID: "alice"}, true},
		{streams.ThreadStream{ThreadID: "t1", UserID: "bob"}, false},
		{streams.ThreadStream{ThreadID: "t1", UserID: "alice", RunID: "r1", Category: runevents.CategoryTrace}, true},
		{streams.ThreadStream{ThreadID: "t1", RunID: "r2"}, false},
		{streams.ThreadStream{ThreadID: "t1", Category: runevents.CategoryMessage}, false},
	} {
		if got := tc.view.Shows(ev); got != tc.want {
			t.Errorf("%+v shows seq 3 of alice, r1, trace: %v, want %v", tc.view, got, tc.want)
		}
		if tc.view.Key() != "thread:t1" {
			t.Errorf("%+v: key %q, want the thread's", tc.view, tc.view.Key())
		}
	}
	if (streams.ThreadStream{ThreadID: "t1"}).Shows(live.Event{Seq: 1}) {
		t.Error("an event without thread attributes is shown")
	}
}

func TestAppendThreadFrameRefusesLineBreaks(t *testing.T) {
	t.Parallel()
	rec := runevents.Record{ThreadID: "t1", RunID: "r1", Seq: 3, EventType: "middleware:a\nb", Category: "middleware", Content: json.RawMessage(`{}`), Metadata: json.RawMessage(`{}`)}
	if out, err := streams.AppendThreadFrame([]byte("keep"), rec); err == nil || string(out) != "keep" {
		t.Errorf("frame of an event type with a line break: %q, %v", out, err)
	}
	rec.EventType = "run.start"
	rec.Content = json.RawMessage("\"a\nb\"")
	if _, err := streams.AppendThreadFrame(nil, rec); err == nil {
		t.Error("frame of data with a line break succeeded")
	}
}

// A thread frame's data is the record's JSON envelope, byte for byte as
// MarshalJSON encodes it.
func TestAppendThreadFrameDataIsTheEnvelope(t *testing.T) {
	t.Parallel()
	rec := benchRecord()
	rec.UserID = "" // no owner: no user_id key
	for _, r := range []runevents.Record{benchRecord(), rec} {
		frame, err := streams.AppendThreadFrame([]byte("before"), r)
		if err != nil {
			t.Fatal(err)
		}
		data, _ := r.MarshalJSON()
		want := "beforeid: 12\nevent: " + string(r.EventType) + "\ndata: " + string(data) + "\n\n"
		if string(frame) != want {
			t.Fatalf("frame:\n%q\nwant:\n%q", frame, want)
		}
	}
}

func benchRecord() runevents.Record {
	return runevents.Record{ThreadID: "thread-1", RunID: "run-1", UserID: "alice", Seq: 12, EventType: runevents.EventSubagentStep,
		Category: runevents.CategorySubagent, Content: json.RawMessage(`{"text":"` + strings.Repeat("x", 180) + `"}`),
		Metadata: json.RawMessage(`{"task_id":"task-1"}`), CreatedAt: time.Date(2026, 12, 1, 18, 0, 0, 123456000, time.UTC)}
}

// BenchmarkAppendThreadFrame appends a 200-byte record's frame to a page
// buffer, as a catch-up does for every row: in place (AppendJSON) and, to
// compare in the same run, through MarshalJSON and a copy (as before).
func BenchmarkAppendThreadFrame(b *testing.B) {
	rec := benchRecord()
	buf := make([]byte, 0, 4096)
	b.Run("MarshalAndCopy", func(b *testing.B) {
		for b.Loop() {
			buf, _ = sse.AppendSeqFrame(buf[:0], rec.Seq, string(rec.EventType), func(b []byte) ([]byte, error) {
				data, err := rec.MarshalJSON()
				return append(b, data...), err
			})
		}
	})
	b.Run("InPlace", func(b *testing.B) {
		for b.Loop() {
			buf, _ = streams.AppendThreadFrame(buf[:0], rec)
		}
	})
}
