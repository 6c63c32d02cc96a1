package threadsvc

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"github.com/runstream/runstream/runevents"
)

// Row is a record as a consumer projection returns it, encoded as the
// record's envelope plus, for the message feeds, the caller's feedback on
// its run. The projections enrich their own copies (the store returns copies, and enrichment
// replaces Content rather than changing its bytes), so stored rows are
// never modified.
type Row struct {
	rec runevents.Record
	// withFeedback adds the feedback member (null when feedback is nil).
	withFeedback bool
	feedback     *FeedbackView
}

func newRows(recs []runevents.Record, withFeedback bool) []Row {
	out := make([]Row, len(recs))
	for i, rec := range recs {
		out[i] = Row{rec: rec, withFeedback: withFeedback}
	}
	return out
}

// MarshalJSON encodes the record envelope, plus feedback when asked.
func (o Row) MarshalJSON() ([]byte, error) {
	b, err := o.rec.MarshalJSON()
	if err != nil || !o.withFeedback {
		return b, err
	}
	fb := []byte("null")
	if o.feedback != nil {
		if fb, err = json.Marshal(o.feedback); err != nil {
			return nil, err
		}
	}
	b = append(b[:len(b)-1], `,"feedback":`...)
	b = append(b, fb...)
	return append(b, '}'), nil
}

// FeedbackView is feedback as a message row carries it: {feedback_id,
// rating, comment}; comment is null when empty.
type FeedbackView struct {
	ID      string          `json:"feedback_id"`
	Rating  json.RawMessage `json:"rating"`
	Comment *string         `json:"comment"`
	Tags    []string        `json:"tags,omitempty"`
}

// NewFeedbackView returns the view of f.
func NewFeedbackView(f runevents.Feedback) *FeedbackView {
	v := &FeedbackView{ID: f.ID, Rating: f.Rating, Tags: f.Tags}
	if f.Comment != "" {
		v.Comment = &f.Comment
	}
	return v
}

// jsonObject decodes a JSON object one level deep.
func jsonObject(raw []byte) (map[string]json.RawMessage, bool) {
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) != nil || obj == nil {
		return nil, false
	}
	return obj, true
}

// jsonString decodes a JSON string; ok is false for anything else.
func jsonString(raw json.RawMessage) (string, bool) {
	var s string
	if len(raw) == 0 || json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}

// encodeJSON encodes v compactly without escaping HTML characters, so that
// content passes through as the producer wrote it.
func encodeJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// runDurations returns each run's turn duration in whole seconds
// (updated_at − created_at, truncated toward zero).
func runDurations(runs []runevents.ThreadRun) map[string]int64 {
	out := make(map[string]int64, len(runs))
	for _, r := range runs {
		if r.CreatedAt.IsZero() || r.UpdatedAt.IsZero() {
			continue
		}
		// A row updated "before" it was created (clocks, an import)
		// lasted no time, not a negative one.
		out[r.RunID] = max(int64(r.UpdatedAt.Sub(r.CreatedAt)/time.Second), 0)
	}
	return out
}

// stampTurnDurations sets content.additional_kwargs.turn_duration on the
// last row of each run (walking newest to oldest) whose content is an
// object of type "ai" and whose caller is not a middleware, when the run
// has a duration (reference §2.10). A null or missing additional_kwargs
// becomes an object; a row whose additional_kwargs is another non-object
// is passed over.
func stampTurnDurations(rows []Row, durations map[string]int64) {
	stamped := map[string]bool{}
	for i := len(rows) - 1; i >= 0; i-- {
		rec := &rows[i].rec
		d, ok := durations[rec.RunID]
		if !ok || stamped[rec.RunID] {
			continue
		}
		if caller, _ := rec.MetadataString("caller"); strings.HasPrefix(caller, runevents.MiddlewareCallerPrefix) {
			continue
		}
		if content, ok := withTurnDuration(rec.Content, d); ok {
			rec.Content = content
			stamped[rec.RunID] = true
		}
	}
}

// withTurnDuration returns a copy of an AI message content with
// additional_kwargs.turn_duration set.
func withTurnDuration(content []byte, d int64) (json.RawMessage, bool) {
	obj, ok := jsonObject(content)
	if !ok {
		return nil, false
	}
	if t, _ := jsonString(obj["type"]); t != "ai" {
		return nil, false
	}
	kwargs := map[string]json.RawMessage{}
	if raw, ok := obj["additional_kwargs"]; ok && string(raw) != "null" {
		if kwargs, ok = jsonObject(raw); !ok {
			return nil, false
		}
	}
	kwargs["turn_duration"] = json.RawMessage(strconv.FormatInt(d, 10))
	var err error
	if obj["additional_kwargs"], err = encodeJSON(kwargs); err != nil {
		return nil, false
	}
	out, err := encodeJSON(obj)
	return out, err == nil
}

// withoutAuthToken returns metadata without its top-level auth_token (a
// legacy secret), or metadata itself when it has none.
func withoutAuthToken(metadata json.RawMessage) json.RawMessage {
	obj, ok := jsonObject(metadata)
	if !ok {
		return metadata
	}
	if _, ok := obj["auth_token"]; !ok {
		return metadata
	}
	delete(obj, "auth_token")
	out, err := encodeJSON(obj)
	if err != nil {
		return metadata
	}
	return out
}
