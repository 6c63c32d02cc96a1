package streams_test

import (
	"encoding/json"
	"testing"

	"github.com/runstream/runstream/runevents"
	"github.com/runstream/runstream/streams"
)

func TestThreadStreamKeys(t *testing.T) {
	t.Parallel()
	for _, s := range []streams.ThreadStream{
		{ThreadID: "t1"},
		{ThreadID: "t1", UserID: "user with spaces&=?"},
		{ThreadID: "t1", UserID: "u", RunID: "r1", Category: runevents.CategoryMessage},
		{ThreadID: "t1", Category: runevents.CategoryTrace},
	} {
		got, err := streams.ParseThreadStreamKey(s.Key())
		if err != nil || got != s {
			t.Errorf("ParseThreadStreamKey(%q) = %+v, %v; want %+v", s.Key(), got, err, s)
		}
	}
	if got := streams.ThreadStreamKey("t1"); got != "thread:t1" {
		t.Errorf("ThreadStreamKey = %q", got)
	}
	for _, key := range []string{"workflow:r1", "thread:t1?color=red", "thread:t1?user=a&user=b", "thread:t1?user=", "thread:t1?%zz"} {
		if _, err := streams.ParseThreadStreamKey(key); err == nil {
			t.Errorf("ParseThreadStreamKey(%q) succeeded", key)
		}
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
