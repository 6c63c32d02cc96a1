package workflow

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/runstream/runstream/internal/jsonenc"
)

// SchemaVersion is the envelope's schemaVersion for protocol v1.0.
const SchemaVersion = "1.0"

// TimestampLayout formats envelope timestamps: RFC 3339 with a numeric
// offset (never "Z") and only as many fractional digits as needed.
const TimestampLayout = "2006-01-02T15:04:05.999999999-07:00"

// Envelope is one workflow event as the protocol transmits it. Its JSON form
// has exactly the protocol's keys, in the protocol's order; NodeID and
// NodeRunID are null for run-scoped events.
type Envelope struct {
	SchemaVersion string
	RunID         string
	WorkflowID    string
	VersionID     string
	Seq           int64
	Event         EventType
	NodeID        string // "" encodes as null
	NodeRunID     string // "" encodes as null
	Timestamp     time.Time
	Data          json.RawMessage // a JSON object; nil encodes as {}
}

// MarshalJSON writes the envelope in the protocol's key order on one line.
func (e Envelope) MarshalJSON() ([]byte, error) {
	return e.AppendJSON(make([]byte, 0, 256+len(e.Data)))
}

// AppendJSON appends the envelope's JSON to b. Data must be one valid JSON
// value (stores hold only such data); it is compacted when it is not
// compact, which validates it. MarshalJSON's output is validated by
// encoding/json.
func (e Envelope) AppendJSON(b []byte) ([]byte, error) {
	data := e.Data
	if len(data) > 0 && !jsonenc.IsCompact(data) {
		var buf bytes.Buffer
		if err := json.Compact(&buf, data); err != nil {
			return nil, fmt.Errorf("envelope seq %d: compact data: %w", e.Seq, err)
		}
		data = buf.Bytes()
	}
	return e.appendJSON(b, data), nil
}

// AppendStoredJSON appends the envelope's JSON with Data copied as it is,
// without the compaction check of AppendJSON: for envelopes read from a
// store, whose Data the event log stored compact. It is the replay's hot
// path. Data must be one valid JSON value.
func (e Envelope) AppendStoredJSON(b []byte) []byte {
	return e.appendJSON(b, e.Data)
}

func (e Envelope) appendJSON(b []byte, data []byte) []byte {
	if len(data) == 0 {
		data = json.RawMessage("{}")
	}
	b = append(b, `{"schemaVersion":`...)
	b = jsonenc.AppendString(b, e.SchemaVersion)
	b = appendField(b, "runId", e.RunID)
	b = appendField(b, "workflowId", e.WorkflowID)
	b = appendField(b, "versionId", e.VersionID)
	b = append(b, `,"seq":`...)
	b = strconv.AppendInt(b, e.Seq, 10)
	b = appendField(b, "event", string(e.Event))
	b = appendNullable(b, "nodeId", e.NodeID)
	b = appendNullable(b, "nodeRunId", e.NodeRunID)
	// A formatted timestamp has no character JSON escapes.
	b = append(b, `,"timestamp":"`...)
	b = e.Timestamp.AppendFormat(b, TimestampLayout)
	b = append(b, `","data":`...)
	b = append(b, data...)
	return append(b, '}')
}

// UnmarshalJSON decodes an envelope; nodeId and nodeRunId may be null.
func (e *Envelope) UnmarshalJSON(b []byte) error {
	var w struct {
		SchemaVersion string          `json:"schemaVersion"`
		RunID         string          `json:"runId"`
		WorkflowID    string          `json:"workflowId"`
		VersionID     string          `json:"versionId"`
		Seq           int64           `json:"seq"`
		Event         EventType       `json:"event"`
		NodeID        *string         `json:"nodeId"`
		NodeRunID     *string         `json:"nodeRunId"`
		Timestamp     string          `json:"timestamp"`
		Data          json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return fmt.Errorf("decode envelope: %w", err)
	}
	ts, err := time.Parse(time.RFC3339Nano, w.Timestamp)
	if err != nil {
		return fmt.Errorf("decode envelope: timestamp: %w", err)
	}
	*e = Envelope{
		SchemaVersion: w.SchemaVersion,
		RunID:         w.RunID,
		WorkflowID:    w.WorkflowID,
		VersionID:     w.VersionID,
		Seq:           w.Seq,
		Event:         w.Event,
		Timestamp:     ts,
		Data:          w.Data,
	}
	if w.NodeID != nil {
		e.NodeID = *w.NodeID
	}
	if w.NodeRunID != nil {
		e.NodeRunID = *w.NodeRunID
	}
	return nil
}

func appendField(b []byte, key, value string) []byte {
	b = append(b, ',', '"')
	b = append(b, key...)
	b = append(b, '"', ':')
	return jsonenc.AppendString(b, value)
}

func appendNullable(b []byte, key, value string) []byte {
	if value == "" {
		b = append(b, ',', '"')
		b = append(b, key...)
		return append(b, `":null`...)
	}
	return appendField(b, key, value)
}
