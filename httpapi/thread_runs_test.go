package httpapi

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/runevents"
)

func TestPutThreadRunCreatesAndUpdates(t *testing.T) {
	forEachThreadBackend(t, testPutThreadRunCreatesAndUpdates)
}

func testPutThreadRunCreatesAndUpdates(t *testing.T, b threadBackend) {
	t.Parallel()
	env := newThreadEnvOn(t, b)
	create := `{"status":"running","created_at":"2026-05-01T09:00:00Z","updated_at":"2026-05-01T09:00:01Z","model_name":"gpt-x",
		"metadata":{"regenerate_from_run_id":"r0","replay_kind":"edit"},"total_input_tokens":10,"total_output_tokens":5,"total_tokens":15,
		"llm_call_count":2,"lead_agent_tokens":12,"subagent_tokens":3,"middleware_tokens":0,
		"token_usage_by_model":{"gpt-x":{"input_tokens":10,"output_tokens":5,"total_tokens":15}},
		"assistant_id":"lead_agent","kwargs":{"stream_mode":["values"],"api_key":"sk-proj-abcdefghijklmnopqrstuvwxyz0123456789ABCD"},
		"multitask_strategy":"enqueue","message_count":4,"stop_reason":"end_turn"}`
	rec := env.do(t, "PUT", "/api/threads/t1/runs/r1", create)
	if rec.Code != 200 {
		t.Fatalf("create: %d %s", rec.Code, rec.Body)
	}
	// DeerFlow's RunResponse members, kwargs redacted as metadata is.
	want := `{"thread_id":"t1","run_id":"r1","assistant_id":"lead_agent","user_id":"alice","status":"running","operation_kind":"run","model_name":"gpt-x",` +
		`"metadata":{"regenerate_from_run_id":"r0","replay_kind":"edit"},"kwargs":{"api_key":"[REDACTED:key]","stream_mode":["values"]},` +
		`"multitask_strategy":"enqueue","message_count":4,"stop_reason":"end_turn","created_at":"2026-05-01T09:00:00.000000+00:00",` +
		`"updated_at":"2026-05-01T09:00:01.000000+00:00","total_input_tokens":10,"total_output_tokens":5,"total_tokens":15,` +
		`"llm_call_count":2,"lead_agent_tokens":12,"subagent_tokens":3,"middleware_tokens":0,` +
		`"token_usage_by_model":{"gpt-x":{"input_tokens":10,"output_tokens":5,"total_tokens":15}}}` + "\n"
	if rec.Body.String() != want {
		t.Errorf("created row\n%s\nwant\n%s", rec.Body, want)
	}
	if got := env.get(t, "/api/threads/t1/runs/r1", "").Body.String(); got != want {
		t.Errorf("GET row\n%s\nwant\n%s", got, want)
	}

	update := `{"status":"success","created_at":"2030-01-01T00:00:00Z","updated_at":"2026-05-01T09:00:07Z","operation_kind":"title"}`
	rec = env.do(t, "PUT", "/api/threads/t1/runs/r1", update)
	row := decodeAs[map[string]any](t, rec)
	if row["status"] != "success" || row["created_at"] != "2026-05-01T09:00:00.000000+00:00" || row["updated_at"] != "2026-05-01T09:00:07.000000+00:00" ||
		row["operation_kind"] != "title" || row["model_name"] != nil || row["total_tokens"] != 0.0 ||
		row["assistant_id"] != nil || row["stop_reason"] != nil || row["multitask_strategy"] != "reject" || row["message_count"] != 0.0 || fmt.Sprint(row["kwargs"]) != "map[]" {
		t.Errorf("updated row %s; want the new fields, the first created_at", rec.Body)
	}
	// A finished run keeps its status: a late write of another is refused
	// and changes nothing.
	if rec := env.do(t, "PUT", "/api/threads/t1/runs/r1", `{"status":"running","total_tokens":1}`); rec.Code != 409 || !strings.Contains(rec.Body.String(), `"code":"CONFLICT"`) {
		t.Errorf("success → running: %d %s, want 409 CONFLICT", rec.Code, rec.Body)
	}
	if row := decodeAs[map[string]any](t, env.get(t, "/api/threads/t1/runs/r1", "")); row["status"] != "success" || row["total_tokens"] != 0.0 {
		t.Errorf("row after a refused write: %v", row)
	}
	env.do(t, "PUT", "/api/threads/t1/runs/r0", `{"status":"success","created_at":"2026-05-01T08:00:00Z"}`)
	list := decodeAs[[]map[string]any](t, env.get(t, "/api/threads/t1/runs", ""))
	if len(list) != 2 || list[0]["run_id"] != "r1" || list[1]["run_id"] != "r0" {
		t.Errorf("runs %v, want r1 then r0 (newest first, as DeerFlow lists them)", list)
	}
	// At most 100, the newest: of r0, r1 and 100 runs created after them,
	// the list holds the 100 and neither r0 nor r1.
	for i := range 100 {
		env.do(t, "PUT", fmt.Sprintf("/api/threads/t1/runs/n%03d", i), fmt.Sprintf(`{"status":"success","created_at":"2026-06-01T00:%02d:%02dZ"}`, i/60, i%60))
	}
	list = decodeAs[[]map[string]any](t, env.get(t, "/api/threads/t1/runs", ""))
	if len(list) != 100 || list[0]["run_id"] != "n099" || list[99]["run_id"] != "n000" {
		t.Errorf("%d runs from %v to %v; want 100, n099 to n000", len(list), list[0]["run_id"], list[len(list)-1]["run_id"])
	}
	// The LangGraph SDK's runs.list pages with limit and offset.
	for query, want := range map[string]string{
		"?limit=3":              "n099 n098 n097",
		"?limit=2&offset=98":    "n001 n000",
		"?offset=100":           "r1 r0",
		"?offset=101&limit=500": "r0",
		"?offset=102":           "",
		"?limit=1000&offset=0":  "102 runs",
	} {
		list := decodeAs[[]map[string]any](t, env.get(t, "/api/threads/t1/runs"+query, ""))
		ids := make([]string, len(list))
		for i, run := range list {
			ids[i] = run["run_id"].(string)
		}
		got := strings.Join(ids, " ")
		if len(list) > 3 {
			got = fmt.Sprintf("%d runs", len(list))
		}
		if got != want {
			t.Errorf("runs%s: %s, want %s", query, got, want)
		}
	}
	for _, query := range []string{"?limit=0", "?limit=1001", "?limit=x", "?offset=-1", "?offset=1&offset=2"} {
		rec := env.do(t, "GET", "/api/threads/t1/runs"+query, "")
		if rec.Code != 422 || !strings.Contains(rec.Body.String(), `"parameter"`) {
			t.Errorf("runs%s: %d %s, want 422 naming the parameter", query, rec.Code, rec.Body)
		}
	}
}

func TestPutThreadRunRefusals(t *testing.T) { forEachThreadBackend(t, testPutThreadRunRefusals) }

func testPutThreadRunRefusals(t *testing.T, b threadBackend) {
	t.Parallel()
	for _, tc := range []struct{ name, path, body string }{
		{"missing status", "/api/threads/t1/runs/r1", `{}`},
		{"unknown status", "/api/threads/t1/runs/r1", `{"status":"done"}`},
		{"unknown member", "/api/threads/t1/runs/r1", `{"status":"running","colour":"red"}`},
		{"metadata array", "/api/threads/t1/runs/r1", `{"status":"running","metadata":[1]}`},
		{"regenerate source not a string", "/api/threads/t1/runs/r1", `{"status":"running","metadata":{"regenerate_from_run_id":5}}`},
		{"replay kind not a string", "/api/threads/t1/runs/r1", `{"status":"running","metadata":{"replay_kind":true}}`},
		{"negative tokens", "/api/threads/t1/runs/r1", `{"status":"running","total_tokens":-1}`},
		{"negative model tokens", "/api/threads/t1/runs/r1", `{"status":"running","token_usage_by_model":{"m":{"total_tokens":-2}}}`},
		{"fractional tokens", "/api/threads/t1/runs/r1", `{"status":"running","total_tokens":1.5}`},
		{"bad time", "/api/threads/t1/runs/r1", `{"status":"running","created_at":"yesterday"}`},
		{"zero time", "/api/threads/t1/runs/r1", `{"status":"running","created_at":"0001-01-01T00:00:00Z"}`},
		{"member name in another case", "/api/threads/t1/runs/r1", `{"status":"running","STATUS":"error"}`},
		{"model member name in another case", "/api/threads/t1/runs/r1", `{"status":"success","token_usage_by_model":{"m":{"input_tokens":1,"INPUT_TOKENS":999}}}`},
		{"empty operation kind", "/api/threads/t1/runs/r1", `{"status":"running","operation_kind":""}`},
		{"bad run id", "/api/threads/t1/runs/r%201", `{"status":"running"}`},
		{"bad thread id", "/api/threads/t%2F1/runs/r1", `{"status":"running"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			env := newThreadEnvOn(t, b)
			wantError(t, env.do(t, "PUT", tc.path, tc.body), 422, runstream.CodeValidationFailed)
			if runs, _ := env.runs.ListRuns(t.Context(), "t1", runevents.AnyOwner); len(runs) != 0 {
				t.Errorf("a refused PUT stored %d rows", len(runs))
			}
		})
	}
	// A bad time names its member, and does not echo the value.
	env := newThreadEnvOn(t, b)
	body := wantError(t, env.do(t, "PUT", "/api/threads/t1/runs/r1", `{"status":"running","updated_at":"yesterday"}`), 422, runstream.CodeValidationFailed)
	problems, _ := body.Details["problems"].([]any)
	if at, _ := problemAt(problems, 0); at != "/updated_at" || strings.Contains(body.Message, "yesterday") {
		t.Errorf("bad updated_at: problem at %q, message %q", at, body.Message)
	}
}

func TestThreadRunOwners(t *testing.T) { forEachThreadBackend(t, testThreadRunOwners) }

func testThreadRunOwners(t *testing.T, b threadBackend) {
	t.Parallel()
	env := newThreadEnvOn(t, b)
	env.putRun(t, runevents.ThreadRun{RunID: "r1"}, 0, 5)
	env.putRun(t, runevents.ThreadRun{ThreadID: "tb", RunID: "rb", OwnerID: "bob"}, 0, 5)
	bob := []string{testUserHeader, "bob"}
	wantError(t, env.do(t, "GET", "/api/threads/t1/runs/r1", "", bob...), 404, runstream.CodeNotFound)
	if rec := env.do(t, "GET", "/api/threads/t1/runs", "", bob...); rec.Code != 200 || rec.Body.String() != "[]\n" {
		t.Errorf("bob lists alice's runs: %d %s, want none", rec.Code, rec.Body)
	}
	wantError(t, env.do(t, "GET", "/api/threads/t1/runs/nope", ""), 404, runstream.CodeNotFound)
	wantError(t, env.do(t, "GET", "/api/threads/tb/runs/rb", ""), 404, runstream.CodeNotFound)
	// bob cannot take over alice's run row, even in a thread of his own.
	wantError(t, env.do(t, "PUT", "/api/threads/t1/runs/r1", `{"status":"error"}`, bob...), 404, runstream.CodeNotFound)
	if got, _ := env.runs.GetRun(t.Context(), "t1", "r1", runevents.AnyOwner); got.Status != runevents.RunSuccess || got.OwnerID != "alice" {
		t.Errorf("alice's row after bob's PUT: %+v", got)
	}
	wantError(t, env.do(t, "GET", "/api/runs/r1/feedback", "", bob...), 404, runstream.CodeNotFound)
	wantError(t, env.do(t, "PUT", "/api/threads/t1/runs/r1/feedback", `{"rating":1}`, bob...), 404, runstream.CodeNotFound)
}

func TestThreadRunFeedback(t *testing.T) { forEachThreadBackend(t, testThreadRunFeedback) }

func testThreadRunFeedback(t *testing.T, b threadBackend) {
	t.Parallel()
	env := newThreadEnvOn(t, b)
	env.putRun(t, runevents.ThreadRun{RunID: "r1"}, 0, 5)
	rec := env.do(t, "PUT", "/api/threads/t1/runs/r1/feedback", `{"rating":1.0,"comment":"nice"}`)
	first := decodeAs[map[string]any](t, rec)
	id, _ := first["feedback_id"].(string)
	if rec.Code != 200 || id == "" || first["rating"] != 1.0 || !strings.Contains(rec.Body.String(), `"rating":1,`) || first["comment"] != "nice" {
		t.Fatalf("feedback = %d %s", rec.Code, rec.Body)
	}
	// DeerFlow's FeedbackResponse members, plus updated_at.
	if first["thread_id"] != "t1" || first["run_id"] != "r1" || first["user_id"] != "alice" || first["created_at"] == "" || first["created_at"] == nil ||
		first["updated_at"] == nil || len(first) != 10 || fmt.Sprint(first["tags"]) != "[]" {
		t.Errorf("feedback members = %v", first)
	}
	if v, ok := first["message_id"]; !ok || v != nil {
		t.Errorf("feedback message_id = %v (present %v), want null", v, ok)
	}
	second := decodeAs[map[string]any](t, env.do(t, "PUT", "/api/threads/t1/runs/r1/feedback", `{"rating":-1}`))
	if second["feedback_id"] != id || second["rating"] != -1.0 || second["comment"] != nil || second["created_at"] != first["created_at"] {
		t.Errorf("replaced feedback = %v; want the same id, rating -1, comment null", second)
	}
	list := decodeAs[[]map[string]any](t, env.get(t, "/api/runs/r1/feedback", ""))
	if len(list) != 1 || list[0]["feedback_id"] != id || list[0]["run_id"] != "r1" || list[0]["thread_id"] != "t1" || list[0]["user_id"] != "alice" || len(list[0]) != 10 {
		t.Errorf("feedback list = %v", list)
	}
	env.putRun(t, runevents.ThreadRun{RunID: "r2"}, 1, 5)
	if got := env.get(t, "/api/runs/r2/feedback", "").Body.String(); got != "[]\n" {
		t.Errorf("feedback of a run without any = %s, want []", got)
	}
	wantError(t, env.do(t, "GET", "/api/runs/nope/feedback", ""), 404, runstream.CodeNotFound)
	wantError(t, env.do(t, "PUT", "/api/threads/t1/runs/nope/feedback", `{"rating":1}`), 404, runstream.CodeNotFound)
	for _, body := range []string{`{}`, `{"rating":null}`, `{"rating":{"a":1}}`, `{"rating":1,"comment":5}`, `{"rating":1,"x":1}`, `{"rating":1,"comment":"` + strings.Repeat("c", 8193) + `"}`,
		`{"rating":1,"comment":"a\u0000b"}`, `{"rating":"a\u0000b"}`, `{"rating":"` + strings.Repeat("u", 256) + `"}`} {
		wantError(t, env.do(t, "PUT", "/api/threads/t1/runs/r1/feedback", body), 422, runstream.CodeValidationFailed)
	}
	for body, path := range map[string]string{`{"rating":1,"comment":"a\u0000b"}`: "/comment", `{"rating":"a\u0000b"}`: "/rating", `{"rating":[1]}`: "/rating"} {
		problems, _ := wantError(t, env.do(t, "PUT", "/api/threads/t1/runs/r1/feedback", body), 422, runstream.CodeValidationFailed).Details["problems"].([]any)
		if at, _ := problemAt(problems, 0); at != path {
			t.Errorf("%s: problem at %q, want %q", body, at, path)
		}
	}
	// Only +1 and -1, as DeerFlow: its pydantic int takes an integral
	// number, an integer's text or a boolean, and its handler refuses
	// another integer with a 400; anything else is a 422 at /rating.
	for _, body := range []string{`{"rating":0}`, `{"rating":2}`, `{"rating":5}`, `{"rating":-2}`, `{"rating":1e3}`, `{"rating":"0"}`, `{"rating":"2"}`, `{"rating":false}`} {
		e := wantError(t, env.do(t, "PUT", "/api/threads/t1/runs/r1/feedback", body), 400, runstream.CodeInvalidArgument)
		if e.Message != "rating must be +1 or -1" {
			t.Errorf("%s: %q", body, e.Message)
		}
	}
	for _, body := range []string{`{"rating":"up"}`, `{"rating":0.5}`, `{"rating":"1.0"}`, `{"rating":""}`} {
		problems, _ := wantError(t, env.do(t, "PUT", "/api/threads/t1/runs/r1/feedback", body), 422, runstream.CodeValidationFailed).Details["problems"].([]any)
		if at, _ := problemAt(problems, 0); at != "/rating" {
			t.Errorf("%s: problem at %q, want /rating", body, at)
		}
	}
	// The refused writes left the feedback as it was.
	if list := decodeAs[[]map[string]any](t, env.get(t, "/api/runs/r1/feedback", "")); len(list) != 1 || list[0]["rating"] != -1.0 {
		t.Errorf("feedback after refused writes = %v", list)
	}
	for body, want := range map[string]float64{`{"rating":"1"}`: 1, `{"rating":" -1 "}`: -1, `{"rating":true}`: 1, `{"rating":-1.0}`: -1} {
		rec := env.do(t, "PUT", "/api/threads/t1/runs/r1/feedback", body)
		if got := decodeAs[map[string]any](t, rec); got["rating"] != want {
			t.Errorf("%s: %d %s, want rating %v", body, rec.Code, rec.Body, want)
		}
	}
}

func TestThreadTokenUsage(t *testing.T) { forEachThreadBackend(t, testThreadTokenUsage) }

func testThreadTokenUsage(t *testing.T, b threadBackend) {
	t.Parallel()
	env := newThreadEnvOn(t, b)
	usage := func(total int64, byModel map[string]int64) runevents.Usage {
		u := runevents.Usage{TotalTokens: total, TotalInputTokens: total / 2, TotalOutputTokens: total - total/2,
			LeadAgentTokens: total - 2, SubagentTokens: 1, MiddlewareTokens: 1}
		for m, n := range byModel {
			if u.ByModel == nil {
				u.ByModel = map[string]runevents.ModelUsage{}
			}
			u.ByModel[m] = runevents.ModelUsage{TotalTokens: n}
		}
		return u
	}
	runs := []runevents.ThreadRun{
		{RunID: "ok", Status: runevents.RunSuccess, ModelName: "m1", Usage: usage(100, nil)},
		{RunID: "multi", Status: runevents.RunError, Usage: usage(50, map[string]int64{"m1": 20, "m2": 30})},
		{RunID: "nomodel", Status: runevents.RunSuccess, Usage: usage(10, nil)},
		{RunID: "active", Status: runevents.RunRunning, ModelName: "m3", Usage: usage(7, nil)},
		{RunID: "pending", Status: runevents.RunPending, Usage: usage(1000, nil)},
		{RunID: "cut", Status: runevents.RunTimeout, Usage: usage(1000, nil)},
		{RunID: "title", Status: runevents.RunSuccess, OperationKind: "title", Usage: usage(1000, nil)},
		{RunID: "bobs", Status: runevents.RunSuccess, OwnerID: "bob", ThreadID: "tb", Usage: usage(1000, nil)},
	}
	for i, r := range runs {
		env.putRun(t, r, i, 1)
	}
	for _, tc := range []struct {
		query string
		want  string
	}{
		{"", `{"thread_id":"t1","total_tokens":160,"total_input_tokens":80,"total_output_tokens":80,"total_runs":3,` +
			`"by_model":{"m1":{"tokens":120,"runs":2},"m2":{"tokens":30,"runs":1},"unknown":{"tokens":10,"runs":1}},` +
			`"by_caller":{"lead_agent":154,"middleware":3,"subagent":3},"context_usage":null}`},
		{"?include_active=true", `{"thread_id":"t1","total_tokens":167,"total_input_tokens":83,"total_output_tokens":84,"total_runs":4,` +
			`"by_model":{"m1":{"tokens":120,"runs":2},"m2":{"tokens":30,"runs":1},"m3":{"tokens":7,"runs":1},"unknown":{"tokens":10,"runs":1}},` +
			`"by_caller":{"lead_agent":159,"middleware":4,"subagent":4},"context_usage":null}`},
	} {
		if got := strings.TrimSpace(env.get(t, "/api/threads/t1/token-usage"+tc.query, "").Body.String()); got != tc.want {
			t.Errorf("token usage%s\n%s\nwant\n%s", tc.query, got, tc.want)
		}
	}
	wantError(t, env.do(t, "GET", "/api/threads/t1/token-usage?include_active=sometimes", ""), 422, runstream.CodeValidationFailed)
	if rec := env.do(t, "GET", "/api/threads/t1/token-usage", "", testUserHeader, "bob"); rec.Code != 200 || !strings.Contains(rec.Body.String(), `"total_tokens":0`) {
		t.Errorf("bob's token usage of alice's thread: %d %s, want alice's runs left out", rec.Code, rec.Body)
	}
}

func TestThreadEndpointsUnavailable(t *testing.T) {
	t.Parallel()
	env := newThreadEnv(t, func(c *envConfig) {
		c.RunEvents, c.Runs, c.ThreadLog, c.Threads = nil, nil, nil, nil
	})
	for _, route := range threadRouteSamples {
		rec := env.do(t, route.method, route.path, route.body)
		if rec.Code != 503 {
			t.Errorf("%s %s without stores = %d %s, want 503", route.method, route.path, rec.Code, rec.Body)
			continue
		}
		if body := decodeError(t, rec); body.Code != runstream.CodeUnavailable {
			t.Errorf("%s %s: code %s", route.method, route.path, body.Code)
		}
	}
}

// TestDeleteThreadRunFeedback: the frontend's un-rate deletes the
// caller's feedback on the run and nobody else's; a second delete, or one
// on a run without feedback, is NOT_FOUND.
func TestDeleteThreadRunFeedback(t *testing.T) { forEachThreadBackend(t, testDeleteThreadRunFeedback) }

func testDeleteThreadRunFeedback(t *testing.T, b threadBackend) {
	t.Parallel()
	env := newThreadEnvOn(t, b)
	env.putRun(t, runevents.ThreadRun{RunID: "r1"}, 0, 5)
	if rec := env.do(t, "PUT", "/api/threads/t1/runs/r1/feedback", `{"rating":1}`); rec.Code != 200 {
		t.Fatalf("rate: %d %s", rec.Code, rec.Body)
	}
	// bob on alice's run answers as on a run nobody has.
	foreign := wantError(t, env.do(t, "DELETE", "/api/threads/t1/runs/r1/feedback", "", testUserHeader, "bob"), 404, runstream.CodeNotFound)
	unknown := wantError(t, env.do(t, "DELETE", "/api/threads/t1/runs/r-none/feedback", "", testUserHeader, "bob"), 404, runstream.CodeNotFound)
	if foreign.Message != strings.ReplaceAll(unknown.Message, "r-none", "r1") {
		t.Errorf("bob on alice's run: %q; on an unknown run: %q", foreign.Message, unknown.Message)
	}
	if list := env.get(t, "/api/runs/r1/feedback", "").Body.String(); !strings.Contains(list, `"rating":1`) {
		t.Fatalf("bob's delete removed alice's feedback: %s", list)
	}
	rec := env.do(t, "DELETE", "/api/threads/t1/runs/r1/feedback", "")
	if rec.Code != 200 || strings.TrimSpace(rec.Body.String()) != `{"success":true}` {
		t.Errorf("un-rate: %d %s, want 200 {\"success\":true}", rec.Code, rec.Body)
	}
	if list := env.get(t, "/api/runs/r1/feedback", "").Body.String(); list != "[]\n" {
		t.Errorf("feedback after un-rate = %s, want []", list)
	}
	again := wantError(t, env.do(t, "DELETE", "/api/threads/t1/runs/r1/feedback", ""), 404, runstream.CodeNotFound)
	if again.Message != "No feedback found for this run" {
		t.Errorf("second un-rate: %q", again.Message)
	}
}

// emptyForStrangers are the reads that answer a thread the caller has
// nothing of (unknown, empty or another user's) with an empty page, as
// the original does; the other routes answer NOT_FOUND.
var emptyForStrangers = map[string]bool{
	"GET /api/threads/t1/runs/r1/events":            true,
	"GET /api/threads/t1/messages":                  true,
	"GET /api/threads/t1/messages/page":             true,
	"GET /api/threads/t1/runs/r1/messages":          true,
	"GET /api/threads/t1/runs/r1/workspace-changes": true,
	"GET /api/threads/t1/token-usage":               true,
	"GET /api/threads/t1/runs":                      true,
	"GET /api/threads/t1/runs/r1/feedback":          true,
	"GET /api/threads/t1/runs/r1/feedback/stats":    true,
}

// conflictForOwners are the routes of an executing run, which answer
// CONFLICT for the runs runstream only stores, to their owner too.
var conflictForOwners = map[string]bool{
	"GET /api/threads/t1/runs/r1/join":   true,
	"GET /api/threads/t1/runs/r1/stream": true,
}

// TestUnknownThreadReadsEmpty: the reads of a thread nobody has written
// answer 200 with the original's empty bodies.
func TestUnknownThreadReadsEmpty(t *testing.T) { forEachThreadBackend(t, testUnknownThreadReadsEmpty) }

func testUnknownThreadReadsEmpty(t *testing.T, b threadBackend) {
	t.Parallel()
	env := newThreadEnvOn(t, b)
	zero := `{"created":0,"modified":0,"deleted":0,"symlink_created":0,"additions":0,"deletions":0,"truncated":false}`
	for path, want := range map[string]string{
		"/api/threads/t-none/messages":                     `[]`,
		"/api/threads/t-none/messages/page":                `{"data":[],"has_more":false,"next_before_seq":null}`,
		"/api/threads/t-none/messages/page?before_seq=9":   `{"data":[],"has_more":false,"next_before_seq":null}`,
		"/api/threads/t-none/runs/r1/messages":             `{"data":[],"has_more":false}`,
		"/api/threads/t-none/runs/r1/messages?after_seq=3": `{"data":[],"has_more":false}`,
		"/api/threads/t-none/runs/r1/events":               `[]`,
		"/api/threads/t-none/runs/r1/workspace-changes":    `{"available":false,"version":1,"summary":` + zero + `,"files":[],"limits":{}}`,
		"/api/threads/t-none/runs/r1/feedback":             `[]`,
		"/api/threads/t-none/runs/r1/feedback/stats":       `{"run_id":"r1","total":0,"positive":0,"negative":0}`,
	} {
		rec := env.do(t, "GET", path, "")
		if rec.Code != 200 || !sameJSON(rec.Body.String(), want) {
			t.Errorf("GET %s: %d %s, want 200 %s", path, rec.Code, rec.Body, want)
		}
	}
	rec := env.do(t, "GET", "/api/threads/t-none/token-usage", "")
	if rec.Code != 200 || !strings.Contains(rec.Body.String(), `"total_runs":0`) || !strings.Contains(rec.Body.String(), `"thread_id":"t-none"`) {
		t.Errorf("token usage of an unknown thread: %d %s", rec.Code, rec.Body)
	}
}

// sameJSON reports whether two JSON texts encode the same value.
func sameJSON(a, b string) bool {
	var va, vb any
	if json.Unmarshal([]byte(a), &va) != nil || json.Unmarshal([]byte(b), &vb) != nil {
		return false
	}
	return reflect.DeepEqual(va, vb)
}

// threadRouteSamples is one valid request per thread endpoint.
var threadRouteSamples = []struct{ method, path, body string }{
	{"POST", "/api/threads/t1/runs/r1/events", batch(startJSON)},
	{"GET", "/api/threads/t1/runs/r1/events", ""},
	{"DELETE", "/api/threads/t1/runs/r1/events", ""},
	{"DELETE", "/api/threads/t1/events", ""},
	{"PUT", "/api/threads/t1/runs/r1", `{"status":"running"}`},
	{"GET", "/api/threads/t1/runs/r1", ""},
	{"GET", "/api/threads/t1/runs", ""},
	{"PUT", "/api/threads/t1/runs/r1/feedback", `{"rating":1}`},
	{"DELETE", "/api/threads/t1/runs/r1/feedback", ""},
	{"POST", "/api/threads/t1/runs/r1/feedback", `{"rating":1,"message_id":"m1"}`},
	{"GET", "/api/threads/t1/runs/r1/feedback", ""},
	{"GET", "/api/threads/t1/runs/r1/feedback/stats", ""},
	{"DELETE", "/api/threads/t1/runs/r1/feedback/fb_x", ""},
	{"GET", "/api/runs/r1/feedback", ""},
	{"POST", "/api/threads/t1/runs/r1/cancel", ""},
	{"GET", "/api/threads/t1/runs/r1/join", ""},
	{"GET", "/api/threads/t1/runs/r1/stream", ""},
	{"POST", "/api/threads/t1/events", `{"events":[{"run_id":"r1","event_type":"run.start","content":{"chain":null},"metadata":{"caller":"lead_agent"}}]}`},
	{"GET", "/api/threads/t1/messages", ""},
	{"GET", "/api/threads/t1/messages/page", ""},
	{"GET", "/api/threads/t1/runs/r1/messages", ""},
	{"GET", "/api/runs/r1/messages", ""},
	{"GET", "/api/threads/t1/runs/r1/workspace-changes", ""},
	{"GET", "/api/threads/t1/token-usage", ""},
	{"GET", "/api/threads/t1/stream", ""},
}

// TestThreadOwnerIsolation checks every thread endpoint: another user's
// thread or run answers exactly like an unknown one, and changes nothing.
func TestThreadOwnerIsolation(t *testing.T) { forEachThreadBackend(t, testThreadOwnerIsolation) }

func testThreadOwnerIsolation(t *testing.T, b threadBackend) {
	t.Parallel()
	env := newThreadEnvOn(t, b)
	if rec := env.do(t, "POST", "/api/threads/t1/runs/r1/events", batch(startJSON, aiJSON)); rec.Code != 201 {
		t.Fatal(rec.Body)
	}
	env.putRun(t, runevents.ThreadRun{RunID: "r1"}, 0, 3)
	before := env.snapshot(t, "t1")
	for _, route := range threadRouteSamples {
		if route.method == "POST" || route.method == "PUT" {
			continue // writes: TestIngestIntoAnotherUsersThread, TestThreadRunOwners
		}
		segments := strings.Split(route.path, "/")
		for i, seg := range segments {
			if seg == "t1" || seg == "r1" {
				segments[i] = seg[:1] + "-none"
			}
		}
		unknownPath := strings.Join(segments, "/")
		if strings.HasSuffix(route.path, "/stream") {
			continue // an open stream: TestThreadStreamBeforeTheFirstWrite
		}
		foreign := env.do(t, route.method, route.path, route.body, testUserHeader, "bob")
		unknown := env.do(t, route.method, unknownPath, route.body, testUserHeader, "bob")
		want := 404
		if emptyForStrangers[route.method+" "+route.path] {
			want = 200
		}
		if foreign.Code != want || unknown.Code != want {
			t.Errorf("%s %s as bob: %d %s; %s: %d %s; want %d for both", route.method, route.path, foreign.Code, foreign.Body, unknownPath, unknown.Code, unknown.Body, want)
			continue
		}
		if want == 200 {
			if f, u := foreign.Body.String(), strings.NewReplacer("t-none", "t1", "r-none", "r1").Replace(unknown.Body.String()); f != u {
				t.Errorf("%s %s: foreign %s differs from unknown %s", route.method, route.path, f, u)
			}
			if strings.Contains(foreign.Body.String(), `"seq"`) {
				t.Errorf("%s %s: bob reads alice's rows: %s", route.method, route.path, foreign.Body)
			}
			continue
		}
		f, u := decodeError(t, foreign), decodeError(t, unknown)
		norm := strings.NewReplacer("t-none", "t1", "r-none", "r1")
		if f.Code != u.Code || f.Message != norm.Replace(u.Message) || fmt.Sprint(f.Details) != fmt.Sprint(u.Details) {
			t.Errorf("%s %s: foreign %+v differs from unknown %+v", route.method, route.path, f, u)
		}
	}
	if after := env.snapshot(t, "t1"); after != before {
		t.Errorf("bob's requests changed alice's rows")
	}
	for _, route := range threadRouteSamples {
		if route.method != "GET" || route.path == "/api/threads/t1/stream" || conflictForOwners[route.method+" "+route.path] {
			continue // the stream never ends: TestThreadStream*; conflicts: internal/deerflowcompat
		}
		if rec := env.do(t, route.method, route.path, route.body); rec.Code != 200 {
			t.Errorf("%s %s as alice: %d %s", route.method, route.path, rec.Code, rec.Body)
		}
	}
}

func TestDeleteThreadEvents(t *testing.T) { forEachThreadBackend(t, testDeleteThreadEvents) }

func testDeleteThreadEvents(t *testing.T, b threadBackend) {
	t.Parallel()
	env := newThreadEnvOn(t, b)
	env.seed(t, humanRow("r1", "h1"), aiRow("r1", "a1"), traceRow("r2"), aiRow("r2", "a2"))
	env.seed(t, runevents.NewEvent{ThreadID: "t1", RunID: "r2", UserID: "bob", EventType: runevents.EventRunStart, Category: runevents.CategoryTrace})
	rec := env.do(t, "DELETE", "/api/threads/t1/runs/r2/events", "")
	if rec.Code != 200 || strings.TrimSpace(rec.Body.String()) != `{"deleted":2}` {
		t.Errorf("delete run = %d %s, want alice's 2 rows", rec.Code, rec.Body)
	}
	rec = env.do(t, "DELETE", "/api/threads/t1/events", "")
	if rec.Code != 200 || strings.TrimSpace(rec.Body.String()) != `{"deleted":2}` {
		t.Errorf("delete thread = %d %s", rec.Code, rec.Body)
	}
	wantError(t, env.do(t, "DELETE", "/api/threads/t1/events", ""), 404, runstream.CodeNotFound)
	if rows := env.snapshot(t, "t1"); strings.Count(rows, `"seq"`) != 1 || !strings.Contains(rows, `"user_id":"bob"`) {
		t.Errorf("rows left: %s; want bob's", rows)
	}
	var left []json.RawMessage
	json.Unmarshal([]byte(env.snapshot(t, "t1")), &left)
	if len(left) != 1 {
		t.Errorf("%d rows left", len(left))
	}
}

// Token totals saturate at the largest int64 instead of wrapping negative.
func TestThreadTokenUsageSaturates(t *testing.T) {
	t.Parallel()
	env := newThreadEnv(t)
	huge := runevents.Usage{TotalTokens: math.MaxInt64, TotalInputTokens: math.MaxInt64, LeadAgentTokens: math.MaxInt64}
	env.putRun(t, runevents.ThreadRun{RunID: "a", Status: runevents.RunSuccess, ModelName: "m", Usage: huge}, 0, 1)
	env.putRun(t, runevents.ThreadRun{RunID: "b", Status: runevents.RunSuccess, ModelName: "m", Usage: huge}, 1, 1)
	got := env.get(t, "/api/threads/t1/token-usage", "").Body.String()
	if strings.Contains(got, "-") || strings.Count(got, "9223372036854775807") < 3 {
		t.Errorf("token usage of two maximal runs = %s; want totals of 9223372036854775807", got)
	}
}
