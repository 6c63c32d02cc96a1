package httpapi

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"sync"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/contracts"
	"github.com/runstream/runstream/internal/jsonscan"
	"github.com/runstream/runstream/internal/jsontype"
	"github.com/runstream/runstream/redact"
	"github.com/runstream/runstream/runevents"
	"github.com/runstream/runstream/threadsvc"
)

// IdempotencyKeyHeader names the header that makes a POST retry-safe.
const IdempotencyKeyHeader = "Idempotency-Key"

// ingestEvent is one event of an ingest request.
type ingestEvent struct {
	// RunID names the event's run in a thread batch (POST
	// /api/threads/{thread_id}/events); the run's own route names it in
	// its path.
	RunID     *string         `json:"run_id"`
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
	return s.ingest(w, r, threadID, runID)
}

// appendThreadBatch is POST /api/threads/{thread_id}/events:
// {"events":[{run_id, event_type, ...}]}, a batch whose events name their
// runs, any number of them, as DeerFlow's history seeds write. It is
// appendThreadEvents otherwise (validation, redaction, Idempotency-Key,
// if_absent), all or nothing: one bad event stores none.
func (s *Server) appendThreadBatch(w http.ResponseWriter, r *http.Request) error {
	threadID, err := pathID(r, "thread_id")
	if err != nil {
		return err
	}
	return s.ingest(w, r, threadID, "")
}

// ingest answers an ingest request of the thread: of the run runID, or,
// when runID is "", of the runs its events name.
func (s *Server) ingest(w http.ResponseWriter, r *http.Request, threadID, runID string) error {
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
		// refuse the request.
		if first, err := s.threads.Replay(r.Context(), user, key, hash); err != nil || first != nil {
			if first != nil {
				writeReplay(w, first)
			}
			return err
		}
	}
	events, err := decodeIngest(body, threadID, runID, s.threads.MaxBatchEvents())
	if err != nil {
		return err
	}
	if ifAbsent && len(events) != 1 {
		return badParam("if_absent", "the singleton write takes exactly one event, got %d", len(events))
	}
	if key != "" {
		return s.appendIdempotent(w, r, threadsvc.IdempotentParams{
			User: user, ThreadID: threadID, Key: key, Hash: hash, Events: events, IfAbsent: ifAbsent,
		})
	}
	return s.appendPlain(w, r, threadID, events, ifAbsent)
}

// appendPlain appends without an idempotency key and writes the response.
// The append still runs to its end if the client leaves (the event log
// makes sure), so what committed is published.
func (s *Server) appendPlain(w http.ResponseWriter, r *http.Request, threadID string, events []runevents.NewEvent, ifAbsent bool) error {
	user := userOf(r)
	status, resp := http.StatusCreated, ingestResponse{}
	if ifAbsent {
		rec, created, err := s.threads.AppendIfAbsent(r.Context(), user, threadID, events[0])
		if err != nil {
			return err
		}
		status, resp = ifAbsentStatus(created), ingestResponse{Events: []runevents.Record{rec}, Created: &created}
	} else {
		recs, err := s.threads.Append(r.Context(), user, threadID, events)
		if err != nil {
			return err
		}
		resp.Events = recs
	}
	buf := responseBufs.Get().(*[]byte)
	body, err := resp.appendJSON((*buf)[:0])
	if err != nil {
		return runstream.Wrap(err, runstream.CodeInternal, "encode response")
	}
	writeRawJSON(w, status, body)
	if cap(body) <= maxPooledResponse {
		*buf = body[:0]
		responseBufs.Put(buf)
	}
	return nil
}

// responseBufs recycles the bodies of ingest answers, which echo every
// record stored: a batch's answer is about as large as its request.
var responseBufs = sync.Pool{New: func() any { return new([]byte) }}

// maxPooledResponse bounds the bodies responseBufs keeps.
const maxPooledResponse = 1 << 20

// appendJSON appends json.Marshal(r) to b, the records copied as
// runevents.AppendRecordsJSON does.
func (r ingestResponse) appendJSON(b []byte) ([]byte, error) {
	if r.Created == nil {
		if out, ok := runevents.AppendRecordsJSON(append(b, `{"events":`...), r.Events); ok {
			return append(out, '}'), nil
		}
	}
	enc, err := json.Marshal(r)
	return append(b, enc...), err
}

// ifAbsentStatus is the status of the singleton write: 201 when it
// created the row, 200 when it found it.
func ifAbsentStatus(created bool) int {
	if created {
		return http.StatusCreated
	}
	return http.StatusOK
}

// decodeIngest decodes an ingest body into events of the thread and run;
// with runID "", each event names its run (run_id, required). Unknown
// members are refused, so a misspelt field is never dropped silently. A
// plain body is taken apart in one pass (scanIngest), any other strictly.
func decodeIngest(body []byte, threadID, runID string, maxEvents int) ([]runevents.NewEvent, error) {
	ins, ok := scanIngest(body, maxEvents)
	if !ok {
		return decodeIngestStrict(body, threadID, runID, maxEvents)
	}
	out := make([]runevents.NewEvent, len(ins))
	for i := range ins {
		e, err := ins[i].event("/events/"+strconv.Itoa(i), threadID, runID)
		if err != nil {
			return nil, err
		}
		out[i] = e
	}
	return out, nil
}

// decodeIngestStrict is decodeIngest with encoding/json and its errors.
func decodeIngestStrict(body []byte, threadID, runID string, maxEvents int) ([]runevents.NewEvent, error) {
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
		e, err := in.event(at, threadID, runID)
		if err != nil {
			return nil, err
		}
		out[i] = e
	}
	return out, nil
}

// event checks the decoded event found at path at and returns it as an
// event of the thread (and of the run runID, when not "").
func (in *ingestEvent) event(at, threadID, runID string) (runevents.NewEvent, error) {
	run, err := ingestRun(at, runID, in.RunID)
	if err != nil {
		return runevents.NewEvent{}, err
	}
	if in.EventType == "" {
		return runevents.NewEvent{}, bodyProblem(at+"/event_type", errors.New("required"))
	}
	e := runevents.NewEvent{ThreadID: threadID, RunID: run, EventType: runevents.EventType(in.EventType),
		Category: runevents.Category(in.Category), Content: in.Content, Metadata: in.Metadata}
	if string(e.Metadata) == "null" {
		e.Metadata = nil
	}
	if in.CreatedAt != nil {
		t, err := threadsvc.ParseTimestamp(at+"/created_at", *in.CreatedAt)
		if err != nil {
			return runevents.NewEvent{}, err
		}
		e.CreatedAt = t
	}
	return e, nil
}

// scanIngest decodes as decodeStrict would a body CheckJSON accepted: 1 to
// maxEvents events, members named exactly, strings without escapes; or not ok.
func scanIngest(body []byte, maxEvents int) (ins []ingestEvent, ok bool) {
	ok = jsonscan.Members(body, func(name, value []byte) bool {
		return string(name) == "events" && ins == nil && jsonscan.Elements(value, func(item []byte) bool {
			var in ingestEvent
			ins = append(ins, in)
			return len(ins) <= maxEvents && jsonscan.Members(item, ins[len(ins)-1].set)
		})
	})
	return ins, ok && len(ins) > 0
}

// set sets the member name of the event to the JSON value; false when it
// is not a member or not a plain value of its type.
func (in *ingestEvent) set(name, value []byte) bool {
	text, ok := jsonscan.String(value)
	switch string(name) {
	case "run_id":
		in.RunID = &text
	case "created_at":
		in.CreatedAt = &text
	case "event_type":
		in.EventType = text
	case "category":
		in.Category = text
	case "content":
		in.Content, ok = value, true
	case "metadata":
		in.Metadata, ok = value, true
	default:
		return false
	}
	return ok
}

// ingestRun returns the run of the event at path at: pathRun, which then
// may not be repeated in the event, or else the event's own run_id.
func ingestRun(at, pathRun string, eventRun *string) (string, error) {
	switch {
	case pathRun != "" && eventRun != nil:
		return "", threadsvc.Problem(at+"/run_id", "not allowed: the path names the run")
	case pathRun != "":
		return pathRun, nil
	case eventRun == nil:
		return "", threadsvc.Problem(at+"/run_id", "required: a thread batch names each event's run")
	case runevents.ValidateID("run_id", *eventRun) != nil:
		return "", threadsvc.Problem(at+"/run_id", "must be 1-64 ASCII letters, digits, hyphens or underscores")
	}
	return *eventRun, nil
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
				return &unknownMemberError{pointer: contracts.PointerToken(redact.Excerpt(name)), name: name}
			}
			if err := exactMembers(value, field.Type); err != nil {
				return within(contracts.PointerToken(name), err)
			}
		}
	case reflect.Map:
		var members map[string]json.RawMessage
		if json.Unmarshal(raw, &members) != nil {
			return nil
		}
		for name, value := range members {
			if err := exactMembers(value, t.Elem()); err != nil {
				return within(contracts.PointerToken(redact.Excerpt(name)), err)
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
		for i, item := range items {
			if err := exactMembers(item, t.Elem()); err != nil {
				return within("/"+strconv.Itoa(i), err)
			}
		}
	}
	return nil
}

// unknownMemberError is exactMembers' refusal of a member its type does
// not have. pointer is the JSON pointer of the member within the value
// exactMembers was given; its last token is the member's name cut to an
// excerpt (redact.Excerpt), as the message quotes it.
type unknownMemberError struct {
	pointer, name string
}

func (e *unknownMemberError) Error() string { return "json: unknown field " + redact.Quote(e.name) }

// within returns err, a member's refusal found inside the value at token,
// with its pointer starting at token.
func within(token string, err error) error {
	if e, ok := err.(*unknownMemberError); ok {
		e.pointer = token + e.pointer
	}
	return err
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
	var unknown *unknownMemberError
	if errors.As(err, &unknown) {
		path += unknown.pointer
	} else if errors.As(err, &typeErr) {
		pointer, want, got := jsontype.Mismatch(typeErr)
		msg = "wrong type: want a JSON " + want + ", not " + got
		path += pointer
	}
	return threadsvc.Problem(path, msg)
}

// idempotencyKeyOf returns the request's Idempotency-Key ("" without
// one) and the request's hash: SHA-256 of method, path, query and body.
// Several values are refused as an invalid key.
func idempotencyKeyOf(r *http.Request, body []byte) (key string, hash []byte, err error) {
	keys := r.Header.Values(IdempotencyKeyHeader)
	if len(keys) == 0 {
		return "", nil, nil
	}
	if len(keys) > 1 || !threadsvc.ValidIdempotencyKey(keys[0]) {
		return "", nil, runstream.Errorf(runstream.CodeValidationFailed, "%s must be one value of 1 to %d printable ASCII characters", IdempotencyKeyHeader, threadsvc.MaxIdempotencyKey).
			WithDetail("parameter", IdempotencyKeyHeader)
	}
	h := sha256.New()
	h.Write([]byte(r.Method + " " + r.URL.Path + "?" + r.URL.RawQuery + "\n"))
	h.Write(body)
	return keys[0], h.Sum(nil), nil
}

// appendIdempotent appends under an Idempotency-Key
// (threadsvc.Service.AppendIdempotent) and writes the response: the first
// one again, with Idempotency-Replayed: true, for a retry.
func (s *Server) appendIdempotent(w http.ResponseWriter, r *http.Request, p threadsvc.IdempotentParams) error {
	p.Response = func(recs []runevents.Record, created bool) (threadsvc.Response, error) {
		status, resp := http.StatusCreated, ingestResponse{Events: recs}
		if p.IfAbsent {
			status, resp.Created = ifAbsentStatus(created), &created
		}
		body, err := resp.appendJSON(nil)
		if err != nil {
			return threadsvc.Response{}, runstream.Wrap(err, runstream.CodeInternal, "encode response")
		}
		return threadsvc.Response{Status: status, Body: body}, nil
	}
	resp, replayed, err := s.threads.AppendIdempotent(r.Context(), p)
	if err != nil {
		return err
	}
	if replayed {
		writeReplay(w, &resp)
		return nil
	}
	writeRawJSON(w, resp.Status, resp.Body)
	return nil
}

// writeReplay answers with the first response to a request's key.
func writeReplay(w http.ResponseWriter, first *threadsvc.Response) {
	w.Header().Set("Idempotency-Replayed", "true")
	writeRawJSON(w, first.Status, first.Body)
}

// writeRawJSON writes an encoded JSON body, and a newline, with the given
// status. The newline may be written into body's spare capacity: the
// caller must not share body's backing array.
func writeRawJSON(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	w.Write(append(body, '\n')) // in body's spare capacity, if it has some (appendJSON leaves it)
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
