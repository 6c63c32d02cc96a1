package httpapi

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"reflect"
	"strconv"
	"strings"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/redact"
	"github.com/runstream/runstream/runevents"
	"github.com/runstream/runstream/threadsvc"
)

// IdempotencyKeyHeader names the header that makes a POST retry-safe.
const IdempotencyKeyHeader = "Idempotency-Key"

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
	return s.idempotent(w, r, body, func(ctx context.Context) (int, any, error) {
		events, err := decodeIngest(body, threadID, runID, s.threads.MaxBatchEvents())
		if err != nil {
			return 0, nil, err
		}
		if !ifAbsent {
			recs, err := s.threads.Append(ctx, userOf(r), threadID, events)
			return http.StatusCreated, ingestResponse{Events: recs}, err
		}
		if len(events) != 1 {
			return 0, nil, badParam("if_absent", "the singleton write takes exactly one event, got %d", len(events))
		}
		rec, created, err := s.threads.AppendIfAbsent(ctx, userOf(r), threadID, events[0])
		status := http.StatusOK
		if created {
			status = http.StatusCreated
		}
		return status, ingestResponse{Events: []runevents.Record{rec}, Created: &created}, err
	})
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
			t, err := threadsvc.ParseTimestamp(at+"/created_at", *in.CreatedAt)
			if err != nil {
				return nil, err
			}
			e.CreatedAt = t
		}
		out[i] = e
	}
	return out, nil
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
				return fmt.Errorf("json: unknown field %s", redact.Quote(name))
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
	msg := jsonErrorText(err)
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &typeErr) {
		msg = "wrong type: want " + typeErr.Type.String()
		if typeErr.Field != "" {
			path += "/" + typeErr.Field
		}
	}
	return threadsvc.Problem(path, msg)
}

// idempotent runs do and writes its response. With an Idempotency-Key
// header it runs under the key (threadsvc.Service.Idempotent): a retry
// with the same key, method, path, query and body gets the first response
// again (with Idempotency-Replayed: true). A request whose write failed on
// the server's side (a threadsvc.WriteError answered 5xx) keeps its key
// reserved, because the write may have committed.
func (s *Server) idempotent(w http.ResponseWriter, r *http.Request, body []byte, do func(ctx context.Context) (int, any, error)) error {
	keys := r.Header.Values(IdempotencyKeyHeader)
	if len(keys) == 0 {
		status, v, err := do(r.Context())
		if err != nil {
			return err
		}
		writeJSON(w, status, v)
		return nil
	}
	p := threadsvc.IdempotentParams{User: userOf(r), KeepKey: func(err error) bool {
		return threadsvc.IsWriteError(err) && ErrorStatus(runstream.ErrorCodeOf(err)) >= 500
	}}
	if len(keys) == 1 {
		p.Key = keys[0] // several values: the empty key, refused as invalid
	}
	h := sha256.New()
	h.Write([]byte(r.Method + " " + r.URL.Path + "?" + r.URL.RawQuery + "\n"))
	h.Write(body)
	p.Hash = h.Sum(nil)
	logf := func(level slog.Level, msg string, err error) {
		s.logger.Log(r.Context(), level, msg, "request_id", requestID(r.Context()), "error", err)
	}
	resp, replayed, err := s.threads.Idempotent(r.Context(), p, do, logf)
	if err != nil {
		return err
	}
	if replayed {
		w.Header().Set("Idempotency-Replayed", "true")
	}
	writeRawJSON(w, resp.Status, resp.Body)
	return nil
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
	threadID, err := pathID(r, "thread_id")
	if err != nil {
		return err
	}
	n, err := s.threads.DeleteThreadEvents(r.Context(), userOf(r), threadID)
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
	threadID, runID, err := threadAndRun(r)
	if err != nil {
		return err
	}
	n, err := s.threads.DeleteRunEvents(r.Context(), userOf(r), threadID, runID)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]int{"deleted": n})
	return nil
}
