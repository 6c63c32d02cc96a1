package streams_test

import (
	"encoding/json"
	"testing"

	"github.com/runstream/runstream/live"
	"github.com/runstream/runstream/runevents"
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
