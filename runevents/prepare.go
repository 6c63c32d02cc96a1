package runevents

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/internal/jsonenc"
	"github.com/runstream/runstream/internal/jsonscan"
)

// ValidateID checks a thread or run id against ^[A-Za-z0-9_-]{1,64}$.
func ValidateID(kind, id string) error {
	if !validID(id) {
		return runstream.Errorf(runstream.CodeInvalidArgument, "invalid %s: expected 1-64 ASCII letters, digits, hyphens or underscores", kind)
	}
	return nil
}

// validID matches ^[A-Za-z0-9_-]{1,64}$ without a regexp: it runs for
// every event written and every page read.
func validID(id string) bool {
	if len(id) < 1 || len(id) > 64 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// Prepare validates e and normalises it into the record a store writes
// (without Seq): ids and limits checked, content and metadata compacted,
// Content nil → "", Metadata nil → {}, CreatedAt defaulted to now in UTC and
// truncated to microseconds, trace content above maxTraceContent bytes
// truncated (maxTraceContent <= 0 means DefaultMaxTraceContent). Every
// backend calls it, so they all store the same bytes.
func Prepare(e NewEvent, now time.Time, maxTraceContent int) (Record, error) {
	if err := ValidateID("thread_id", e.ThreadID); err != nil {
		return Record{}, err
	}
	if err := ValidateID("run_id", e.RunID); err != nil {
		return Record{}, err
	}
	if _, err := NewEventType(string(e.EventType)); err != nil {
		return Record{}, runstream.Wrap(err, runstream.CodeInvalidArgument, "invalid event_type: want 1 to %d characters", MaxEventTypeLength)
	}
	if _, err := NewCategory(string(e.Category)); err != nil {
		return Record{}, runstream.Wrap(err, runstream.CodeInvalidArgument, "invalid category: want 1 to %d characters", MaxCategoryLength)
	}
	for _, f := range []struct{ name, value string }{{"event_type", string(e.EventType)}, {"category", string(e.Category)}, {"user_id", e.UserID}} {
		if !utf8.ValidString(f.value) || strings.ContainsRune(f.value, 0) {
			return Record{}, runstream.Errorf(runstream.CodeInvalidArgument, "invalid %s: it must be valid UTF-8 without NUL characters", f.name)
		}
	}
	if !utf8.Valid(e.Content) || !utf8.Valid(e.Metadata) {
		return Record{}, runstream.Errorf(runstream.CodeInvalidArgument, "content and metadata must be valid UTF-8")
	}
	content := []byte(`""`)
	if len(e.Content) > 0 {
		var err error
		if content, err = compact(e.Content); err != nil {
			return Record{}, runstream.Wrap(err, runstream.CodeInvalidArgument, "content is not valid JSON")
		}
	}
	metadata := []byte(`{}`)
	if len(e.Metadata) > 0 {
		var err error
		if metadata, err = compact(e.Metadata); err != nil || metadata[0] != '{' {
			return Record{}, runstream.Wrap(err, runstream.CodeInvalidArgument, "metadata must be a JSON object")
		}
	}
	created := e.CreatedAt
	if created.IsZero() {
		created = now.UTC()
	}
	rec := Record{
		ThreadID:  e.ThreadID,
		RunID:     e.RunID,
		EventType: e.EventType,
		Category:  e.Category,
		Content:   content,
		Metadata:  metadata,
		CreatedAt: created.Truncate(time.Microsecond),
		UserID:    e.UserID,
	}
	if rec.Category == CategoryTrace {
		if maxTraceContent <= 0 {
			maxTraceContent = DefaultMaxTraceContent
		}
		if err := truncateTrace(&rec, maxTraceContent); err != nil {
			return Record{}, err
		}
	}
	return rec, nil
}

// PrepareBatch prepares every event of a batch and checks that they belong
// to one thread. It fails on the first invalid event, naming its index.
func PrepareBatch(events []NewEvent, now time.Time, maxTraceContent int) ([]Record, error) {
	out := make([]Record, len(events))
	for i, e := range events {
		if i > 0 && e.ThreadID != events[0].ThreadID {
			return nil, runstream.Errorf(runstream.CodeInvalidArgument, "events[%d]: a batch must belong to one thread", i).WithDetail("index", i)
		}
		rec, err := Prepare(e, now, maxTraceContent)
		if err != nil {
			e := runstream.AsError(err)
			return nil, &runstream.Error{Code: e.Code, Message: "events[" + strconv.Itoa(i) + "]: " + e.Message, Details: map[string]any{"index": i}, Err: e.Err}
		}
		out[i] = rec
	}
	return out, nil
}

// StoredTraceSize returns the bytes of content and metadata a store keeps
// of a trace event given with content and metadata: those as given when
// the content's text fits maxTraceContent, else the truncated content, as
// a JSON string (up to six times its text's bytes with escapes), and the
// metadata that records the truncation (see Prepare).
func StoredTraceSize(content, metadata []byte, maxTraceContent int) int {
	size := len(content) + len(metadata)
	if len(content) <= maxTraceContent {
		return size // the text of a JSON string is no longer than the string
	}
	if len(metadata) == 0 {
		metadata = []byte(`{}`)
	}
	rec := Record{Content: content, Metadata: metadata}
	if truncateTrace(&rec, maxTraceContent) != nil {
		return size // not an event Prepare accepts: it refuses it
	}
	return len(rec.Content) + len(rec.Metadata)
}

// truncateTrace replaces over-long trace content by its first max bytes (cut
// at a UTF-8 boundary) as a JSON string, and records the truncation in
// metadata.
func truncateTrace(rec *Record, max int) error {
	text := rec.Content
	var s string
	// Content is compact valid JSON: a string starts with its quote, and
	// anything else would not decode into s.
	if text[0] == '"' && json.Unmarshal(rec.Content, &s) == nil {
		text = []byte(s)
	}
	if len(text) <= max {
		return nil
	}
	cut := text[:max]
	for len(cut) > 0 && !utf8.Valid(cut) {
		cut = cut[:len(cut)-1]
	}
	enc, err := json.Marshal(string(cut))
	if err != nil {
		return runstream.Wrap(err, runstream.CodeInternal, "truncate trace content")
	}
	var meta map[string]json.RawMessage
	if err := json.Unmarshal(rec.Metadata, &meta); err != nil {
		return runstream.Wrap(err, runstream.CodeInvalidArgument, "metadata must be a JSON object")
	}
	meta["content_truncated"] = json.RawMessage("true")
	meta["original_byte_length"] = json.RawMessage(strconv.Itoa(len(text)))
	metadata, err := json.Marshal(meta)
	if err != nil {
		return runstream.Wrap(err, runstream.CodeInternal, "encode truncated metadata")
	}
	rec.Content, rec.Metadata = enc, metadata
	return nil
}

// compact returns a compact copy of the JSON value raw, or an error when it
// is not one valid JSON value. Input that is compact already, as producers
// usually send it, is validated (in one pass when jsonscan.Plain accepts
// it) and copied without re-encoding.
func compact(raw []byte) ([]byte, error) {
	if jsonenc.IsCompact(raw) {
		if !jsonscan.Plain(raw, maxPlainDepth) && !json.Valid(raw) {
			return nil, errors.New("invalid JSON")
		}
		return bytes.Clone(raw), nil
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// CheckLimit rejects a non-positive limit.
func CheckLimit(limit int) error {
	if limit <= 0 {
		return runstream.Errorf(runstream.CodeInvalidArgument, "limit must be positive, got %d", limit)
	}
	return nil
}

// CheckOwner rejects the zero Owner.
func CheckOwner(o Owner) error { return runstream.CheckOwner(o) }
