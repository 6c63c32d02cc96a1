package httpapi

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/runevents"
)

type runPageBody struct {
	Data    []wireRow `json:"data"`
	HasMore bool      `json:"has_more"`
}

func seqSpan(from, to int64) string {
	var out []int64
	for s := from; s <= to; s++ {
		out = append(out, s)
	}
	return fmt.Sprint(out)
}

func TestRunMessagesPaging(t *testing.T) { forEachThreadBackend(t, testRunMessagesPaging) }

func testRunMessagesPaging(t *testing.T, b threadBackend) {
	t.Parallel()
	env := newThreadEnvOn(t, b)
	env.putRun(t, runevents.ThreadRun{RunID: "r1"}, 0, 4)
	var events []runevents.NewEvent
	for i := range 66 {
		events = append(events, aiRow("r1", fmt.Sprint(i)))
		if i%10 == 0 {
			events = append(events, traceRow("r1"), aiRow("r2", "other"))
		}
	}
	env.seed(t, events...)
	var msgs []int64 // the message seqs of r1
	stored, _ := env.events.ListMessagesByRun(t.Context(), runevents.ListMessagesByRunParams{ThreadID: "t1", RunID: "r1", Owner: runevents.AnyOwner, Limit: 1000})
	for _, r := range stored {
		msgs = append(msgs, r.Seq)
	}
	window := func(after, before int64, limit int) (string, bool) {
		var w []int64
		for _, s := range msgs {
			if s > after && (before == 0 || s < before) {
				w = append(w, s)
			}
		}
		more := len(w) > limit
		if more && after > 0 {
			w = w[:limit]
		} else if more {
			w = w[len(w)-limit:]
		}
		return fmt.Sprint(w), more
	}
	for _, tc := range []struct {
		query         string
		after, before int64
		limit         int
	}{
		{"", 0, 0, 50},
		{"?limit=16", 0, 0, 16},
		{"?limit=16&before_seq=18", 0, 18, 16},
		{"?after_seq=10", 10, 0, 50},
		{"?after_seq=10&before_seq=40&limit=5", 10, 40, 5},
		{"?limit=200", 0, 0, 200},
	} {
		want, more := window(tc.after, tc.before, tc.limit)
		for _, path := range []string{"/api/threads/t1/runs/r1/messages", "/api/runs/r1/messages"} {
			p := decodeAs[runPageBody](t, env.get(t, path+tc.query, ""))
			if fmt.Sprint(wireSeqs(p.Data)) != want || p.HasMore != more {
				t.Errorf("%s%s = %v has_more %v, want %s %v", path, tc.query, wireSeqs(p.Data), p.HasMore, want, more)
			}
		}
	}
}

func TestRunMessagesDurationAndEmpty(t *testing.T) {
	forEachThreadBackend(t, testRunMessagesDurationAndEmpty)
}

func testRunMessagesDurationAndEmpty(t *testing.T, b threadBackend) {
	t.Parallel()
	env := newThreadEnvOn(t, b)
	env.putRun(t, runevents.ThreadRun{RunID: "r1"}, 0, 5)
	env.putRun(t, runevents.ThreadRun{RunID: "empty"}, 1, 5)
	env.seed(t, humanRow("r1", "h"), aiRow("r1", "first"), aiRow("r1", "last"), callerAIRow("r1", "title", "middleware:title"))
	p := decodeAs[runPageBody](t, env.get(t, "/api/threads/t1/runs/r1/messages", ""))
	for _, r := range p.Data {
		want := int64(-1)
		if contentID(r) == "last" {
			want = 5
		}
		if got := turnDuration(r); got != want {
			t.Errorf("row %s turn_duration %d, want %d", contentID(r), got, want)
		}
		if r.Feedback != nil {
			t.Errorf("run messages carry feedback: %s", r.Feedback)
		}
	}
	stateless := decodeAs[runPageBody](t, env.get(t, "/api/runs/r1/messages", ""))
	for _, r := range stateless.Data {
		if turnDuration(r) != -1 {
			t.Errorf("stateless run messages stamped a duration on %s", contentID(r))
		}
	}
	for _, path := range []string{"/api/threads/t1/runs/empty/messages", "/api/runs/empty/messages", "/api/threads/t1/runs/no-row/messages"} {
		if got := strings.TrimSpace(env.get(t, path, "").Body.String()); got != `{"data":[],"has_more":false}` {
			t.Errorf("%s = %s", path, got)
		}
	}
	body := wantError(t, env.do(t, "GET", "/api/runs/no-row/messages", ""), 404, runstream.CodeNotFound)
	if !strings.Contains(body.Message, "no-row") {
		t.Errorf("404 message %q does not name the run", body.Message)
	}
	for _, q := range []string{"limit=0", "limit=201", "before_seq=0", "before_seq=-1", "after_seq=0", "after_seq=-1"} {
		wantError(t, env.do(t, "GET", "/api/runs/r1/messages?"+q, ""), 422, runstream.CodeValidationFailed)
		wantError(t, env.do(t, "GET", "/api/threads/t1/runs/r1/messages?"+q, ""), 422, runstream.CodeValidationFailed)
	}
}

func TestRunEventsFilters(t *testing.T) { forEachThreadBackend(t, testRunEventsFilters) }

func testRunEventsFilters(t *testing.T, b threadBackend) {
	t.Parallel()
	env := newThreadEnvOn(t, b)
	step := func(task string, i int) runevents.NewEvent {
		return row("r1", runevents.EventSubagentStep, runevents.CategorySubagent,
			fmt.Sprintf(`{"task_id":%q,"message_index":%d,"kind":"tool","text":"x","truncated":false,"tool_name":"t"}`, task, i),
			fmt.Sprintf(`{"task_id":%q,"message_index":%d}`, task, i))
	}
	var events []runevents.NewEvent
	var wantA []int64
	for i := range 300 {
		switch i % 7 {
		case 0:
			events = append(events, row("r1", runevents.EventSubagentStart, runevents.CategorySubagent, `{"task_id":"A","description":null}`, `{"task_id":"A"}`))
		case 1, 4:
			events = append(events, step("A", i))
		case 2:
			events = append(events, step("B", i))
		case 3:
			events = append(events, aiRow("r1", fmt.Sprint(i)))
		default:
			events = append(events, traceRow("r1"))
		}
	}
	recs := env.seed(t, events...)
	env.events.PutBatch(t.Context(), []runevents.NewEvent{{ThreadID: "t1", RunID: "r2", UserID: "alice", EventType: runevents.EventSubagentStep,
		Category: runevents.CategorySubagent, Content: json.RawMessage(`{}`), Metadata: json.RawMessage(`{"task_id":"A"}`)}})
	for _, r := range recs {
		if id, _ := r.MetadataString("task_id"); id == "A" && r.EventType == runevents.EventSubagentStep {
			wantA = append(wantA, r.Seq)
		}
	}
	// A subtask card pages its steps: every step exactly once.
	for _, limit := range []int{1, 7, 2000} {
		var got []int64
		query := fmt.Sprintf("?event_types=subagent.step&task_id=A&limit=%d", limit)
		for range len(wantA) + 2 {
			page := decodeAs[[]wireRow](t, env.get(t, "/api/threads/t1/runs/r1/events"+query, ""))
			got = append(got, wireSeqs(page)...)
			if len(page) < limit {
				break
			}
			query = fmt.Sprintf("?event_types=subagent.step&task_id=A&limit=%d&after_seq=%d", limit, page[len(page)-1].Seq)
		}
		if fmt.Sprint(got) != fmt.Sprint(wantA) {
			t.Errorf("limit %d: paged %d steps, want %d exactly once", limit, len(got), len(wantA))
		}
	}
	count := func(query string) int {
		return len(decodeAs[[]wireRow](t, env.get(t, "/api/threads/t1/runs/r1/events"+query, "")))
	}
	for _, tc := range []struct {
		query string
		want  int
	}{
		{"", 300},
		{"?limit=2000", 300},
		{"?limit=1", 1},
		{"?event_types=", 300},
		{"?event_types=subagent.start,subagent.step,subagent.end", 43 + 86 + 43},
		{"?event_types=subagent.start,subagent.step,subagent.end&task_id=A", 43 + 86},
		{"?event_types=subagent.start,%20subagent.step", 43},
		{"?event_types=subagent.start,subagent.start,subagent.start", 43},
		{"?event_types=llm.ai.response", 43},
		{"?task_id=B", 43},
		{"?task_id=", 0}, // matched by equality: no row's task_id is ""
		{"?after_seq=290", 10},
	} {
		if got := count(tc.query); got != tc.want {
			t.Errorf("events%s: %d rows, want %d", tc.query, got, tc.want)
		}
	}
	many := make([]string, maxEventTypesFilter+1)
	for i := range many {
		many[i] = fmt.Sprintf("t%d", i)
	}
	for _, q := range []string{"limit=0", "limit=-1", "limit=2001", "after_seq=0", "after_seq=-1", "task_id=a&task_id=b", "event_types=" + strings.Join(many, ",")} {
		wantError(t, env.do(t, "GET", "/api/threads/t1/runs/r1/events?"+q, ""), 422, runstream.CodeValidationFailed)
	}
}

func TestRunEventsDropAuthToken(t *testing.T) { forEachThreadBackend(t, testRunEventsDropAuthToken) }

func testRunEventsDropAuthToken(t *testing.T, b threadBackend) {
	t.Parallel()
	env := newThreadEnvOn(t, b)
	env.seed(t, row("r1", runevents.EventLLMAIResponse, runevents.CategoryMessage, `{"type":"ai","content":"x","tool_calls":[]}`,
		`{"caller":"lead_agent","auth_token":"secret-token","token_usage":{"total_tokens":3},"nested":{"auth_token":"kept"}}`))
	events := decodeAs[[]wireRow](t, env.get(t, "/api/threads/t1/runs/r1/events", ""))
	if got := string(events[0].Metadata); got != `{"caller":"lead_agent","nested":{"auth_token":"kept"},"token_usage":{"total_tokens":3}}` {
		t.Errorf("metadata %s; want auth_token gone, the rest kept", got)
	}
	if !strings.Contains(env.snapshot(t, "t1"), "secret-token") {
		t.Error("the stored row lost its auth_token: the handler modified it")
	}
}

func TestWorkspaceChanges(t *testing.T) { forEachThreadBackend(t, testWorkspaceChanges) }

func testWorkspaceChanges(t *testing.T, b threadBackend) {
	t.Parallel()
	env := newThreadEnvOn(t, b)
	full := `{"version":1,"summary":{"created":1,"modified":0,"deleted":0,"symlink_created":0,"additions":1,"deletions":0,"truncated":false},` +
		`"files":[{"path":"report.md","status":"created","diff":"+hello"},"odd"],"limits":{"max_files":200}}`
	ws := func(run, content, meta string) runevents.NewEvent {
		return row(run, runevents.EventWorkspaceChanges, runevents.CategoryWorkspace, content, meta)
	}
	var many []runevents.NewEvent
	for i := range 12 {
		many = append(many, ws("many", `"old"`, fmt.Sprintf(`{"workspace_changes":{"version":1,"files":[],"n":%d}}`, i)))
	}
	env.seed(t, append(many,
		ws("meta", `"1 file changed"`, `{"workspace_changes":`+full+`}`),
		ws("content", full, `{}`),
		ws("nosummary", `"x"`, `{"workspace_changes":{"files":[{"path":"a","diff":"d"}]}}`),
		ws("string", `"only text"`, `{}`),
		traceRow("none"),
	)...)
	get := func(run, query string) map[string]any {
		return decodeAs[map[string]any](t, env.get(t, "/api/threads/t1/runs/"+run+"/workspace-changes"+query, ""))
	}
	js := func(v any) string { b, _ := json.Marshal(v); return string(b) }

	got := get("meta", "")
	if got["available"] != true || js(got["files"]) != `[{"diff":"+hello","path":"report.md","status":"created"},"odd"]` || js(got["limits"]) != `{"max_files":200}` {
		t.Errorf("full = %s", js(got))
	}
	if got := get("meta", "?include_diff=false"); js(got["files"]) != `[{"diff":"","path":"report.md","status":"created"},"odd"]` {
		t.Errorf("include_diff=false files = %s", js(got["files"]))
	}
	if got := get("content", "?include_files=false"); got["available"] != true || js(got["files"]) != `[]` || got["version"] != 1.0 {
		t.Errorf("summary only = %s", js(got))
	}
	got = get("nosummary", "")
	if js(got["summary"]) != `{"additions":0,"created":0,"deleted":0,"deletions":0,"modified":0,"symlink_created":0,"truncated":false}` || got["version"] != nil {
		t.Errorf("without summary = %s", js(got))
	}
	if got := get("many", ""); got["n"] != 11.0 {
		t.Errorf("with 12 rows: n = %v, want the newest (11)", got["n"])
	}
	empty := `{"available":false,"files":[],"limits":{},"summary":{"additions":0,"created":0,"deleted":0,"deletions":0,"modified":0,"symlink_created":0,"truncated":false},"version":1}`
	for _, run := range []string{"none", "string", "unknown"} {
		if got := strings.TrimSpace(env.get(t, "/api/threads/t1/runs/"+run+"/workspace-changes", "").Body.String()); got != empty {
			t.Errorf("run %s = %s, want the empty answer", run, got)
		}
	}
	wantError(t, env.do(t, "GET", "/api/threads/t1/runs/meta/workspace-changes?include_files=perhaps", ""), 422, runstream.CodeValidationFailed)
}
