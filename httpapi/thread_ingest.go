package httpapi

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/eventlog"
	"github.com/runstream/runstream/runevents"
)

// IdempotencyKeyHeader names the header that makes a POST retry-safe.
const IdempotencyKeyHeader = "Idempotency-Key"

// maxIdempotencyKey bounds an Idempotency-Key value.
const maxIdempotencyKey = 255

// ingestEvent is one event of an ingest request.
type ingestEvent struct {
	EventType string          `json:"event_type"`
	Category  string          `json:"category"`
	Content   json.RawMessage `json:"content"`
	Metadata  json.RawMessage `json:"metadata"`
	CreatedAt *string         `json:"created_at"`
}

// ingestResponse is the answer of an ingest request. Created is set for
// the singleton write only.
type ingestResponse struct {
	Events  []runevents.Record `json:"events"`
	Created *bool              `json:"created,omitempty"`
}

// appendThreadEvents is POST /api/threads/{thread_id}/runs/{run_id}/events:
// {"events":[{event_type, category?, content?, metadata?, created_at?}]}
// → 201 {"events":[records]}. With ?if_absent=true and exactly one event
// it is the singleton write: 201 {"events":[record],"created":true}, or
// 200 with created false and the existing record.
func (s *Server) appendThreadEvents(w http.ResponseWriter, r *http.Request) error {
	log, err := s.threadLog()
	if err != nil {
		return err
	}
	threadID, runID, err := threadAndRun(r)
	if err != nil {
		return err
	}
	ifAbsent, err := queryBool(r.URL.Query(), "if_absent", false)
	if err != nil {
		return err
	}
	body, err := readJSONBody(r)
	if err != nil {
		return err
	}
	key, hash, err := idempotencyKeyOf(r, body)
	if err != nil {
		return err
	}
	user := userOf(r)
	if key != "" {
		// A completed key is answered before the checks, which might now
		// refuse the request (a thread since closed, say).
		first, err := log.LookupIdempotent(r.Context(), user, key, hash)
		if err != nil {
			return err
		}
		if first != nil {
			writeReplay(w, first)
			return nil
		}
	}
	events, err := decodeIngest(body, threadID, runID, log.Limits().MaxBatchEvents)
	if err != nil {
		return err
	}
	if ifAbsent && len(events) != 1 {
		return badParam("if_absent", "the singleton write takes exactly one event, got %d", len(events))
	}
	if err := s.requireWritableThread(r, threadID); err != nil {
		return err
	}
	if key != "" {
		return s.idempotent(w, r, log, runevents.IdempotentAppend{
			UserID: user, Key: key, RequestHash: hash, Events: events, IfAbsent: ifAbsent,
		})
	}
	if ifAbsent {
		rec, created, err := log.AppendIfAbsent(r.Context(), user, events[0])
		if err != nil {
			return err
		}
		status := http.StatusOK
		if created {
			status = http.StatusCreated
		}
		writeJSON(w, status, ingestResponse{Events: []runevents.Record{rec}, Created: &created})
		return nil
	}
	recs, err := log.Append(r.Context(), user, events)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, ingestResponse{Events: recs})
	return nil
}

// decodeIngest decodes an ingest body into events of the thread and run.
// Unknown members are refused, so a misspelt field is never dropped
// silently.
func decodeIngest(body []byte, threadID, runID string, maxEvents int) ([]runevents.NewEvent, error) {
	var req struct {
		Events []json.RawMessage `json:"events"`
	}
	if err := decodeStrict(body, &req); err != nil {
		return nil, bodyProblem("", err)
	}
	if req.Events == nil {
		return nil, bodyProblem("/events", errors.New("required: an array of events"))
	}
	if len(req.Events) > maxEvents {
		return nil, runstream.Errorf(runstream.CodePayloadTooLarge, "a batch holds at most %d events, got %d", maxEvents, len(req.Events)).
			WithDetail("limit", maxEvents)
	}
	if len(req.Events) == 0 {
		return nil, bodyProblem("/events", errors.New("a batch holds at least one event"))
	}
	out := make([]runevents.NewEvent, len(req.Events))
	for i, raw := range req.Events {
		at := "/events/" + strconv.Itoa(i)
		var in ingestEvent
		if err := decodeStrict(raw, &in); err != nil {
			return nil, bodyProblem(at, err)
		}
		if in.EventType == "" {
			return nil, bodyProblem(at+"/event_type", errors.New("required"))
		}
		e := runevents.NewEvent{ThreadID: threadID, RunID: runID, EventType: runevents.EventType(in.EventType),
			Category: runevents.Category(in.Category), Content: in.Content, Metadata: in.Metadata}
		if string(e.Metadata) == "null" {
			e.Metadata = nil
		}
		if in.CreatedAt != nil {
			t, err := parseTimestamp(at+"/created_at", *in.CreatedAt)
			if err != nil {
				return nil, err
			}
			e.CreatedAt = t
		}
		out[i] = e
	}
	return out, nil
}

// parseTimestamp reads a body's date-time member at path: RFC 3339 with a
// time zone, and not the zero time, which the stores read as "now".
func parseTimestamp(path, value string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, value)
	if err != nil {
		return time.Time{}, bodyProblem(path, errors.New("must be an RFC 3339 date-time with a time zone"))
	}
	if t.IsZero() {
		return time.Time{}, bodyProblem(path, errors.New("must not be 0001-01-01T00:00:00Z, the zero time"))
	}
	return t, nil
}

// decodeStrict decodes a JSON object into v, refusing unknown members,
// and members whose name matches a field only when case is ignored:
// encoding/json would take "EVENT_TYPE" for event_type, the last of the
// two winning, past the duplicate-key check.
func decodeStrict(raw []byte, v any) error {
	if err := exactMembers(raw, reflect.TypeOf(v)); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// exactMembers checks that every member of the objects in raw that decode
// into structs of t is named exactly as a field's JSON name. A value of
// another shape is left for the decoder to refuse.
func exactMembers(raw []byte, t reflect.Type) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Struct:
		if reflect.PointerTo(t).Implements(jsonUnmarshaler) {
			return nil
		}
		var members map[string]json.RawMessage
		if json.Unmarshal(raw, &members) != nil {
			return nil
		}
		for name, value := range members {
			field, ok := jsonField(t, name)
			if !ok {
				return fmt.Errorf("json: unknown field %q", name)
			}
			if err := exactMembers(value, field.Type); err != nil {
				return err
			}
		}
	case reflect.Map:
		var members map[string]json.RawMessage
		if json.Unmarshal(raw, &members) != nil {
			return nil
		}
		for _, value := range members {
			if err := exactMembers(value, t.Elem()); err != nil {
				return err
			}
		}
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 { // json.RawMessage, []byte
			return nil
		}
		var items []json.RawMessage
		if json.Unmarshal(raw, &items) != nil {
			return nil
		}
		for _, item := range items {
			if err := exactMembers(item, t.Elem()); err != nil {
				return err
			}
		}
	}
	return nil
}

var jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()

// jsonField returns the field of struct t whose JSON name is exactly
// name, looking into embedded structs as encoding/json does.
func jsonField(t reflect.Type, name string) (reflect.StructField, bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if tag == "-" {
			continue
		}
		if f.Anonymous && tag == "" {
			embedded := f.Type
			if embedded.Kind() == reflect.Pointer {
				embedded = embedded.Elem()
			}
			if embedded.Kind() == reflect.Struct {
				if inner, ok := jsonField(embedded, name); ok {
					return inner, true
				}
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if cmp.Or(tag, f.Name) == name {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

// bodyProblem is VALIDATION_FAILED for a request body that is valid JSON
// of the wrong shape, with the path of the problem.
func bodyProblem(path string, err error) error {
	msg := err.Error()
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &typeErr) {
		msg = "wrong type: want " + typeErr.Type.String()
		if typeErr.Field != "" {
			path += "/" + typeErr.Field
		}
	}
	problem := map[string]string{"path": path, "message": msg}
	where := path
	if where == "" {
		where = "body"
	}
	return runstream.Errorf(runstream.CodeValidationFailed, "%s: %s", where, msg).WithDetail("problems", []map[string]string{problem})
}

// idempotencyKeyOf returns the request's Idempotency-Key ("" without
// one) and the request's hash: SHA-256 of method, path, query and body.
func idempotencyKeyOf(r *http.Request, body []byte) (key string, hash []byte, err error) {
	keys := r.Header.Values(IdempotencyKeyHeader)
	if len(keys) == 0 {
		return "", nil, nil
	}
	key = keys[0]
	if len(keys) > 1 || !validIdempotencyKey(key) {
		return "", nil, runstream.Errorf(runstream.CodeValidationFailed, "%s must be one value of 1 to %d printable ASCII characters", IdempotencyKeyHeader, maxIdempotencyKey).
			WithDetail("parameter", IdempotencyKeyHeader)
	}
	h := sha256.New()
	h.Write([]byte(r.Method + " " + r.URL.Path + "?" + r.URL.RawQuery + "\n"))
	h.Write(body)
	return key, h.Sum(nil), nil
}

// idempotent appends under an Idempotency-Key and writes the response.
// The key, the rows and the response commit in one transaction of the
// store (runevents.IdempotentAppender), so a retry with the same key,
// method, path, query and body gets the first response again (with
// Idempotency-Replayed: true), whatever crashed in between; another
// request with the same key is VALIDATION_FAILED; a key held by a request
// in progress is UNAVAILABLE with Retry-After. A failed append leaves no
// trace of the key, so its retry applies the batch once. The append runs
// to its end even if the client leaves, so that its outcome is stored.
func (s *Server) idempotent(w http.ResponseWriter, r *http.Request, log *eventlog.ThreadLog, a runevents.IdempotentAppend) error {
	a.Response = func(recs []runevents.Record, created bool) (runevents.IdempotentResponse, error) {
		status, resp := http.StatusCreated, ingestResponse{Events: recs}
		if a.IfAbsent {
			resp.Created = &created
			if !created {
				status = http.StatusOK
			}
		}
		body, err := json.Marshal(resp)
		if err != nil {
			return runevents.IdempotentResponse{}, runstream.Wrap(err, runstream.CodeInternal, "encode response")
		}
		return runevents.IdempotentResponse{Status: status, Body: body}, nil
	}
	res, err := log.AppendIdempotent(context.WithoutCancel(r.Context()), a)
	if err != nil {
		return err
	}
	if res.Replayed {
		writeReplay(w, &res.Response)
		return nil
	}
	writeRawJSON(w, res.Response.Status, res.Response.Body)
	return nil
}

// writeReplay answers with the first response to a request's key.
func writeReplay(w http.ResponseWriter, first *runevents.IdempotentResponse) {
	w.Header().Set("Idempotency-Replayed", "true")
	writeRawJSON(w, first.Status, first.Body)
}

func validIdempotencyKey(key string) bool {
	if key == "" || len(key) > maxIdempotencyKey {
		return false
	}
	for i := 0; i < len(key); i++ {
		if key[i] < ' ' || key[i] > '~' {
			return false
		}
	}
	return true
}

// writeRawJSON writes an encoded JSON body as writeJSON does.
func writeRawJSON(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	w.Write(append(body[:len(body):len(body)], '\n'))
}

// deleteThreadEvents is DELETE /api/threads/{thread_id}/events: the
// caller's rows of the thread → {"deleted": n}.
func (s *Server) deleteThreadEvents(w http.ResponseWriter, r *http.Request) error {
	store, err := s.runEvents()
	if err != nil {
		return err
	}
	threadID, err := pathID(r, "thread_id")
	if err != nil {
		return err
	}
	if err := s.requireThread(r, threadID); err != nil {
		return err
	}
	n, err := store.DeleteByThread(r.Context(), threadID, ownerOf(r))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]int{"deleted": n})
	return nil
}

// deleteThreadRunEvents is DELETE
// /api/threads/{thread_id}/runs/{run_id}/events: the caller's rows of the
// run → {"deleted": n}.
func (s *Server) deleteThreadRunEvents(w http.ResponseWriter, r *http.Request) error {
	store, err := s.runEvents()
	if err != nil {
		return err
	}
	threadID, runID, err := threadAndRun(r)
	if err != nil {
		return err
	}
	if err := s.requireThread(r, threadID); err != nil {
		return err
	}
	n, err := store.DeleteByRun(r.Context(), threadID, runID, ownerOf(r))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]int{"deleted": n})
	return nil
}
