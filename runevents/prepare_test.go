package runevents_test

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/runevents"
)

func valid() runevents.NewEvent {
	return runevents.NewEvent{ThreadID: "t1", RunID: "r1", EventType: runevents.EventRunStart, Category: runevents.CategoryTrace,
		Content: json.RawMessage(`{"chain":null}`), Metadata: json.RawMessage(`{"caller":"lead_agent"}`), UserID: "u"}
}

func TestPrepareRefusesWhatABackendCouldNotStore(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 29, 10, 0, 0, 123456789, time.UTC)
	if _, err := runevents.Prepare(valid(), now, 0); err != nil {
		t.Fatalf("valid event refused: %v", err)
	}
	for name, edit := range map[string]func(*runevents.NewEvent){
		"thread id with a dot":      func(e *runevents.NewEvent) { e.ThreadID = "a.b" },
		"thread id path escape":     func(e *runevents.NewEvent) { e.ThreadID = "../x" },
		"run id of 65 bytes":        func(e *runevents.NewEvent) { e.RunID = strings.Repeat("r", 65) },
		"empty event type":          func(e *runevents.NewEvent) { e.EventType = "" },
		"event type of 33":          func(e *runevents.NewEvent) { e.EventType = runevents.EventType(strings.Repeat("e", 33)) },
		"category of 17":            func(e *runevents.NewEvent) { e.Category = runevents.Category(strings.Repeat("c", 17)) },
		"NUL in event type":         func(e *runevents.NewEvent) { e.EventType = "run\x00start" },
		"invalid UTF-8 in category": func(e *runevents.NewEvent) { e.Category = "tr\xffce" },
		"NUL in user id":            func(e *runevents.NewEvent) { e.UserID = "u\x00" },
		"invalid UTF-8 in content":  func(e *runevents.NewEvent) { e.Content = json.RawMessage("\"\xff\"") },
		"invalid UTF-8 in metadata": func(e *runevents.NewEvent) { e.Metadata = json.RawMessage("{\"a\":\"\xfe\"}") },
		"content not JSON":          func(e *runevents.NewEvent) { e.Content = json.RawMessage(`{"a":`) },
		"metadata an array":         func(e *runevents.NewEvent) { e.Metadata = json.RawMessage(`[1]`) },
	} {
		e := valid()
		edit(&e)
		if _, err := runevents.Prepare(e, now, 0); runstream.ErrorCodeOf(err) != runstream.CodeInvalidArgument {
			t.Errorf("%s: err = %v, want INVALID_ARGUMENT", name, err)
		}
	}
}

func TestPrepareNormalises(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 29, 10, 0, 0, 123456789, time.FixedZone("X", 3600))
	e := valid()
	e.Content, e.Metadata = json.RawMessage("{ \"chain\" : \"x\" }"), nil
	rec, err := runevents.Prepare(e, now, 0)
	if err != nil {
		t.Fatal(err)
	}
	if string(rec.Content) != `{"chain":"x"}` || string(rec.Metadata) != `{}` {
		t.Errorf("content %s metadata %s", rec.Content, rec.Metadata)
	}
	if want := time.Date(2026, 11, 29, 9, 0, 0, 123456000, time.UTC); !rec.CreatedAt.Equal(want) || rec.CreatedAt.Location() != time.UTC {
		t.Errorf("created_at %v, want %v in UTC at microseconds", rec.CreatedAt, want)
	}
	e = valid()
	e.Content = nil
	if rec, _ := runevents.Prepare(e, now, 0); string(rec.Content) != `""` {
		t.Errorf("nil content stored as %s, want \"\"", rec.Content)
	}
}

func TestValidateIDMatchesItsPattern(t *testing.T) {
	t.Parallel()
	pattern := regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)
	for _, id := range []string{"", "a", "A-z_09", strings.Repeat("x", 64), strings.Repeat("x", 65), "a.b", "a b", "é", "../x", "a\x00", "-", "_"} {
		if got, want := runevents.ValidateID("id", id) == nil, pattern.MatchString(id); got != want {
			t.Errorf("ValidateID(%q) accepts=%v, the pattern says %v", id, got, want)
		}
	}
}

func FuzzValidateID(f *testing.F) {
	pattern := regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)
	f.Add("thread-1")
	f.Fuzz(func(t *testing.T, id string) {
		if got, want := runevents.ValidateID("id", id) == nil, pattern.MatchString(id); got != want {
			t.Fatalf("ValidateID(%q) accepts=%v, the pattern says %v", id, got, want)
		}
	})
}
