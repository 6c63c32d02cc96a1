package deerflowimport

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/runstream/runstream/redact"
	"github.com/runstream/runstream/runevents"
)

// Row is one run-event row of a source.
type Row struct {
	// Loc says where the row is: "threads/t1/runs/r1.jsonl:3" or
	// "run_events id=42".
	Loc   string
	Event runevents.ImportEvent
	// Owned reports whether the row names its owner (a SQL row whose
	// user_id is not NULL).
	Owned bool
}

// Run is one run row of a source, its owner in OwnerID ("" when NULL).
type Run struct {
	Loc string
	Row runevents.ThreadRun
}

// Feedback is one feedback row of a source, its owner in UserID ("" when
// NULL).
type Feedback struct {
	Loc string
	Row runevents.Feedback
}

// Problem is a row, or a part of a source, that could not be taken.
type Problem struct {
	Loc string
	Err error
}

func (p Problem) String() string { return p.Loc + ": " + p.Err.Error() }

// Source is a DeerFlow store to read. Its methods report what they cannot
// read with report and go on; their error means the source itself failed.
type Source interface {
	// Name says what the source is, for messages.
	Name() string
	// Threads calls fn with the rows of each thread in turn, by seq, and
	// the problems of the thread's rows that could not be read.
	Threads(fn func(threadID string, rows []Row, bad []Problem) error) error
	// Runs returns the run rows.
	Runs(report func(Problem)) ([]Run, error)
	// Feedback returns the feedback rows.
	Feedback(report func(Problem)) ([]Feedback, error)
	Close() error
}

// timeLayouts are the forms of DeerFlow's timestamps: Python's isoformat
// (JSONL, created_at given by writers), PostgreSQL's text of timestamptz,
// and SQLAlchemy's naive text on SQLite.
var timeLayouts = []string{
	time.RFC3339Nano,
	"2006-01-02 15:04:05.999999999Z07:00",
	"2006-01-02 15:04:05.999999999Z07",
	"2006-01-02T15:04:05.999999999Z07",
}

// naiveLayouts are timestamps without an offset: UTC, as DeerFlow reads
// them (#3130).
var naiveLayouts = []string{
	"2006-01-02 15:04:05.999999999",
	"2006-01-02T15:04:05.999999999",
}

// parseTime reads a DeerFlow timestamp.
func parseTime(s string) (time.Time, error) {
	s = strings.TrimSpace(s)
	for _, l := range timeLayouts {
		if t, err := time.Parse(l, s); err == nil {
			return t, nil
		}
	}
	for _, l := range naiveLayouts {
		if t, err := time.ParseInLocation(l, s, time.UTC); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("created_at %s is not an ISO 8601 timestamp", redact.Quote(s))
}

// jsonlRecord is a line of DeerFlow's JSONL store.
type jsonlRecord struct {
	ThreadID  *string         `json:"thread_id"`
	RunID     *string         `json:"run_id"`
	EventType *string         `json:"event_type"`
	Category  *string         `json:"category"`
	Content   json.RawMessage `json:"content"`
	Metadata  json.RawMessage `json:"metadata"`
	Seq       json.RawMessage `json:"seq"`
	CreatedAt *string         `json:"created_at"`
	UserID    *string         `json:"user_id"`
}

// decodeLine turns a JSONL line into a row's event.
func decodeLine(line []byte) (ev runevents.ImportEvent, owned bool, err error) {
	var r jsonlRecord
	if err := json.Unmarshal(line, &r); err != nil {
		return ev, false, fmt.Errorf("not a JSON record: %w", err)
	}
	for _, f := range []struct {
		name string
		v    *string
	}{{"thread_id", r.ThreadID}, {"run_id", r.RunID}, {"event_type", r.EventType}, {"category", r.Category}, {"created_at", r.CreatedAt}} {
		if f.v == nil {
			return ev, false, fmt.Errorf("no %s string", f.name)
		}
	}
	seq, err := strconv.ParseInt(string(r.Seq), 10, 64)
	if err != nil || seq < 1 {
		return ev, false, fmt.Errorf("seq %s is not a positive integer", redact.Quote(string(r.Seq)))
	}
	created, err := parseTime(*r.CreatedAt)
	if err != nil {
		return ev, false, err
	}
	ev = runevents.ImportEvent{Seq: seq, NewEvent: runevents.NewEvent{
		ThreadID: *r.ThreadID, RunID: *r.RunID, EventType: runevents.EventType(*r.EventType), Category: runevents.Category(*r.Category),
		Content: r.Content, Metadata: r.Metadata, CreatedAt: created,
	}}
	if len(ev.Content) == 0 {
		ev.Content = json.RawMessage(`""`)
	}
	if len(ev.Metadata) == 0 || string(ev.Metadata) == "null" {
		ev.Metadata = json.RawMessage(`{}`)
	}
	if r.UserID != nil && *r.UserID != "" {
		ev.UserID, owned = *r.UserID, true
	}
	return ev, owned, nil
}

// Markers DeerFlow's SQL store adds to the metadata of rows whose content
// it stored as JSON text.
const (
	markerJSON = "content_is_json"
	markerDict = "content_is_dict"
)

// sqlContent decodes a SQL row's content and metadata as DeerFlow's SQL
// store reads them: the content text is JSON-decoded when a marker is
// truthy (kept as a string when it does not decode), a string otherwise;
// the markers are dropped.
func sqlContent(content string, metadata string) (json.RawMessage, json.RawMessage, error) {
	meta := map[string]json.RawMessage{}
	if strings.TrimSpace(metadata) != "" && strings.TrimSpace(metadata) != "null" {
		if err := json.Unmarshal([]byte(metadata), &meta); err != nil || meta == nil {
			return nil, nil, errors.New("event_metadata is not a JSON object")
		}
	}
	isJSON := truthy(meta[markerJSON]) || truthy(meta[markerDict])
	metaOut := json.RawMessage(metadata)
	_, hasJSON := meta[markerJSON]
	_, hasDict := meta[markerDict]
	if hasJSON || hasDict {
		delete(meta, markerJSON)
		delete(meta, markerDict)
		var err error
		if metaOut, err = json.Marshal(meta); err != nil {
			return nil, nil, err
		}
	}
	if len(bytes.TrimSpace(metaOut)) == 0 || string(bytes.TrimSpace(metaOut)) == "null" {
		metaOut = json.RawMessage(`{}`)
	}
	if isJSON && json.Valid([]byte(content)) {
		return json.RawMessage(content), metaOut, nil
	}
	text, err := json.Marshal(content)
	return text, metaOut, err
}

// truthy reports whether a JSON value is true in Python's sense.
func truthy(raw json.RawMessage) bool {
	var v any
	if len(raw) == 0 || json.Unmarshal(raw, &v) != nil {
		return false
	}
	switch v := v.(type) {
	case bool:
		return v
	case float64:
		return v != 0
	case string:
		return v != ""
	case []any:
		return len(v) > 0
	case map[string]any:
		return len(v) > 0
	}
	return false
}
