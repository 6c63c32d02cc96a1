package runevents

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/runstream/runstream/internal/jsonenc"
	"github.com/runstream/runstream/internal/jsonscan"
)

// CreatedAtLayout encodes Record.CreatedAt: RFC 3339 with a numeric offset
// and microseconds.
const CreatedAtLayout = "2006-01-02T15:04:05.000000-07:00"

// Record is one persisted run event.
type Record struct {
	ThreadID  string
	RunID     string
	Seq       int64
	EventType EventType
	Category  Category
	// Content is any compact JSON value.
	Content json.RawMessage
	// Metadata is a compact JSON object.
	Metadata  json.RawMessage
	CreatedAt time.Time
	// UserID is the owner; empty for rows written by internal callers.
	UserID string
}

// Clone returns a deep copy of r.
func (r Record) Clone() Record {
	r.Content = bytes.Clone(r.Content)
	r.Metadata = bytes.Clone(r.Metadata)
	return r
}

// Prefixes of metadata.caller (reference §3.2): a subagent's rows
// ("subagent:general-purpose") and a middleware's ("middleware:title").
const (
	SubagentCallerPrefix   = "subagent:"
	MiddlewareCallerPrefix = "middleware:"
)

// LeadAI reports whether r is an AI response of the lead agent: not a
// middleware's nor a subagent's (by metadata.caller).
func (r Record) LeadAI() bool {
	if !r.EventType.IsAIResponse() {
		return false
	}
	caller, _ := r.MetadataString("caller")
	return !strings.HasPrefix(caller, MiddlewareCallerPrefix) && !strings.HasPrefix(caller, SubagentCallerPrefix)
}

// MetadataString returns metadata[key] when it is a JSON string.
func (r Record) MetadataString(key string) (string, bool) {
	var m map[string]json.RawMessage
	if json.Unmarshal(r.Metadata, &m) != nil {
		return "", false
	}
	raw, ok := m[key]
	if !ok {
		return "", false
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}

// MarshalJSON encodes the record envelope of the contract, keys in the
// order thread_id, run_id, event_type, category, content, metadata, seq,
// created_at, and user_id when the row has an owner.
func (r Record) MarshalJSON() ([]byte, error) {
	return r.AppendJSON(make([]byte, 0, r.jsonSize())), nil
}

// jsonSize is about the size of the record's MarshalJSON.
func (r Record) jsonSize() int { return 160 + len(r.Content) + len(r.Metadata) }

// AppendJSON appends the record's JSON envelope, as MarshalJSON encodes
// it, to b: frames and responses are written in place this way, without a
// copy.
func (r Record) AppendJSON(b []byte) []byte {
	var at [len(CreatedAtLayout)]byte
	return appendEnvelope(b, r.ThreadID, r.RunID, string(r.EventType), string(r.Category), r.UserID,
		[]byte(r.Content), []byte(r.Metadata), r.Seq, r.CreatedAt.AppendFormat(at[:0], CreatedAtLayout))
}

// RecordText is a record as a store reads it, in text (T: strings, or the
// bytes of values a driver read): CreatedAt is the CreatedAtLayout text of
// its time, Content and Metadata its compact JSON (as Prepare leaves
// them), UserID empty for a row without an owner. A store appends the
// envelopes of the rows it reads from it (AppendJSON), without decoding
// them into Records.
type RecordText[T string | []byte] struct {
	ThreadID, RunID, UserID, EventType, Category T
	Content, Metadata                            T
	Seq                                          int64
	CreatedAt                                    T
}

// AppendJSON appends the JSON envelope of the record t holds to b: byte
// for byte Record.AppendJSON of the record decoded from t.
func (t *RecordText[T]) AppendJSON(b []byte) []byte {
	return appendEnvelope(b, t.ThreadID, t.RunID, t.EventType, t.Category, t.UserID, t.Content, t.Metadata, t.Seq, t.CreatedAt)
}

// appendEnvelope appends the JSON envelope of a record, keys in the order
// MarshalJSON states; empty content is written "", empty metadata {}.
func appendEnvelope[S, T string | []byte](b []byte, threadID, runID, eventType, category, userID S, content, metadata T, seq int64, createdAt T) []byte {
	b = append(b, `{"thread_id":`...)
	b = jsonenc.AppendString(b, threadID)
	b = append(b, `,"run_id":`...)
	b = jsonenc.AppendString(b, runID)
	b = append(b, `,"event_type":`...)
	b = jsonenc.AppendString(b, eventType)
	b = append(b, `,"category":`...)
	b = jsonenc.AppendString(b, category)
	b = append(b, `,"content":`...)
	if len(content) == 0 {
		b = append(b, `""`...)
	}
	b = append(b, content...)
	b = append(b, `,"metadata":`...)
	if len(metadata) == 0 {
		b = append(b, `{}`...)
	}
	b = append(b, metadata...)
	b = append(b, `,"seq":`...)
	b = strconv.AppendInt(b, seq, 10)
	// The layout's output needs no JSON escaping: digits and -:.T+ only.
	b = append(b, `,"created_at":"`...)
	b = append(append(b, createdAt...), '"')
	if len(userID) > 0 {
		b = append(b, `,"user_id":`...)
		b = jsonenc.AppendString(b, userID)
	}
	return append(b, '}')
}

// UnmarshalJSON decodes the record envelope.
func (r *Record) UnmarshalJSON(b []byte) error {
	var w struct {
		ThreadID  string          `json:"thread_id"`
		RunID     string          `json:"run_id"`
		Seq       int64           `json:"seq"`
		EventType EventType       `json:"event_type"`
		Category  Category        `json:"category"`
		Content   json.RawMessage `json:"content"`
		Metadata  json.RawMessage `json:"metadata"`
		CreatedAt time.Time       `json:"created_at"`
		UserID    *string         `json:"user_id"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*r = Record{ThreadID: w.ThreadID, RunID: w.RunID, Seq: w.Seq, EventType: w.EventType,
		Category: w.Category, Content: w.Content, Metadata: w.Metadata, CreatedAt: w.CreatedAt}
	if w.UserID != nil {
		r.UserID = *w.UserID
	}
	return nil
}

func orDefault(raw json.RawMessage, def string) []byte {
	if len(raw) == 0 {
		return []byte(def)
	}
	return raw
}

// AppendRecordsJSON appends recs as the JSON array json.Marshal writes for
// them, HTML characters escaped as it escapes them, without its second
// pass over the bytes. The envelope MarshalJSON writes is compact valid
// JSON, HTML characters escaped; content and metadata are copied as they
// are when they are compact JSON that jsonscan.Plain accepts, and the
// record escaped when they hold HTML characters. ok is false, and the
// result unusable, when one is not plain or recs is nil; the caller then
// uses json.Marshal, which also words the error.
func AppendRecordsJSON(b []byte, recs []Record) (_ []byte, ok bool) {
	// closingRoom is capacity left for the caller's closing bytes (the
	// brace of an enclosing object, a newline), so that they do not copy
	// the whole document.
	const closingRoom = 4
	if recs == nil {
		return b, false
	}
	size := 2 + closingRoom
	for _, r := range recs {
		size += r.jsonSize() + 1
	}
	b = append(slices.Grow(b, size), '[')
	for i, r := range recs {
		if i > 0 {
			b = append(b, ',')
		}
		start := len(b)
		b = r.AppendJSON(b)
		escape := false
		for _, raw := range [][]byte{orDefault(r.Content, `""`), orDefault(r.Metadata, `{}`)} {
			if !jsonenc.IsCompact(raw) || !jsonscan.Plain(raw, maxPlainDepth) {
				return b, false
			}
			escape = escape || mayEscapeHTML(raw)
		}
		if escape {
			var buf bytes.Buffer
			json.HTMLEscape(&buf, b[start:])
			b = append(b[:start], buf.Bytes()...)
		}
	}
	return append(b, ']'), true
}

// mayEscapeHTML reports whether json.HTMLEscape might change b: it holds
// <, > or &, or the first byte of U+2028 or U+2029.
func mayEscapeHTML(b []byte) bool {
	for _, c := range b {
		if c == '<' || c == '>' || c == '&' || c == 0xE2 {
			return true
		}
	}
	return false
}

// maxPlainDepth is encoding/json's deepest nesting.
const maxPlainDepth = 10000
