package fastapi

import (
	"reflect"
	"testing"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/contracts"
)

func TestDetail(t *testing.T) {
	for _, c := range []struct {
		name    string
		code    runstream.ErrorCode
		details map[string]any
		want    any
	}{
		{"not a validation error", runstream.CodeNotFound, nil, "boom"},
		{"path parameter", runstream.CodeValidationFailed, map[string]any{"parameter": "thread_id"},
			[]Item{{Loc: []any{"path", "thread_id"}, Msg: "boom", Type: "value_error"}}},
		{"query parameter", runstream.CodeValidationFailed, map[string]any{"parameter": "limit"},
			[]Item{{Loc: []any{"query", "limit"}, Msg: "boom", Type: "value_error"}}},
		// run_id is a path parameter on most routes, a query parameter of
		// the thread stream, whose error says so.
		{"a path parameter's name in the query", runstream.CodeValidationFailed, map[string]any{"parameter": "run_id", "in": "query"},
			[]Item{{Loc: []any{"query", "run_id"}, Msg: "boom", Type: "value_error"}}},
		{"header", runstream.CodeValidationFailed, map[string]any{"parameter": "Idempotency-Key"},
			[]Item{{Loc: []any{"header", "Idempotency-Key"}, Msg: "boom", Type: "value_error"}}},
		{"body members", runstream.CodeValidationFailed, map[string]any{"problems": []contracts.Problem{
			{Path: "/events/1/event_type", Message: "required"}, {Path: "/a~1b", Message: "bad"}}},
			[]Item{{Loc: []any{"body", "events", 1, "event_type"}, Msg: "required", Type: "missing"},
				{Loc: []any{"body", "a/b"}, Msg: "bad", Type: "value_error"}}},
		{"several parameters", runstream.CodeValidationFailed, map[string]any{"parameters": []map[string]string{
			{"parameter": "limit", "in": "query", "message": "limit: bad"}, {"parameter": "thread_id", "message": "thread_id: bad"}}},
			[]Item{{Loc: []any{"query", "limit"}, Msg: "limit: bad", Type: "value_error"},
				{Loc: []any{"path", "thread_id"}, Msg: "thread_id: bad", Type: "value_error"}}},
		{"validation naming nothing", runstream.CodeValidationFailed, nil, "boom"},
	} {
		if got := Detail(c.code, "boom", c.details); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: %#v, want %#v", c.name, got, c.want)
		}
	}
}
