package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/memory"
	"github.com/runstream/runstream/runevents"
)

type pageBody struct {
	Data          []wireRow `json:"data"`
	HasMore       bool      `json:"has_more"`
	NextBeforeSeq *int64    `json:"next_before_seq"`
}

func (env *threadEnv) page(t *testing.T, query string) pageBody {
	t.Helper()
	return decodeAs[pageBody](t, env.get(t, "/api/threads/t1/messages/page"+query, ""))
}

func (env *threadEnv) legacy(t *testing.T, query string) []wireRow {
	t.Helper()
	return decodeAs[[]wireRow](t, env.get(t, "/api/threads/t1/messages"+query, ""))
}

func ids(rows []wireRow) []string {
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = contentID(r)
	}
	return out
}

func TestPageBackwardAcrossRuns(t *testing.T) { forEachThreadBackend(t, testPageBackwardAcrossRuns) }

func testPageBackwardAcrossRuns(t *testing.T, b threadBackend) {
	t.Parallel()
	env := newThreadEnvOn(t, b)
	env.seed(t, humanRow("r1", "h1"), aiRow("r1", "a1"), humanRow("r2", "h2"), aiRow("r2", "a2"), humanRow("r3", "h3"), aiRow("r3", "a3"))
	p := env.page(t, "?limit=3")
	if fmt.Sprint(wireSeqs(p.Data)) != "[4 5 6]" || !p.HasMore || p.NextBeforeSeq == nil || *p.NextBeforeSeq != 4 {
		t.Errorf("first page %v has_more %v next %v", wireSeqs(p.Data), p.HasMore, p.NextBeforeSeq)
	}
	p = env.page(t, "?limit=3&before_seq=4")
	if fmt.Sprint(wireSeqs(p.Data)) != "[1 2 3]" || p.HasMore || p.NextBeforeSeq != nil {
		t.Errorf("second page %v has_more %v next %v", wireSeqs(p.Data), p.HasMore, p.NextBeforeSeq)
	}
	if p := env.page(t, "?limit=6"); len(p.Data) != 6 || p.HasMore {
		t.Errorf("exactly limit rows: %d rows, has_more %v; want 6 and false", len(p.Data), p.HasMore)
	}
	if p := env.page(t, ""); len(p.Data) != 6 || p.HasMore {
		t.Errorf("default limit: %d rows, has_more %v", len(p.Data), p.HasMore)
	}
}

func TestPageOfAThreadWithoutMessages(t *testing.T) {
	forEachThreadBackend(t, testPageOfAThreadWithoutMessages)
}

func testPageOfAThreadWithoutMessages(t *testing.T, b threadBackend) {
	t.Parallel()
	env := newThreadEnvOn(t, b)
	env.putRun(t, runevents.ThreadRun{RunID: "r1", Status: runevents.RunRunning}, 0, 0)
	env.seed(t, traceRow("r1"))
	got := strings.TrimSpace(env.get(t, "/api/threads/t1/messages/page", "").Body.String())
	if got != `{"data":[],"has_more":false,"next_before_seq":null}` {
		t.Errorf("empty page = %s", got)
	}
	if got := strings.TrimSpace(env.get(t, "/api/threads/t1/messages", "").Body.String()); got != "[]" {
		t.Errorf("empty legacy feed = %s", got)
	}
}

func TestPageHidesInternalRows(t *testing.T) { forEachThreadBackend(t, testPageHidesInternalRows) }

func testPageHidesInternalRows(t *testing.T, b threadBackend) {
	t.Parallel()
	env := newThreadEnvOn(t, b)
	env.seed(t,
		humanRow("r1", "h1"),
		aiRow("r1", "lead-task-call"),
		callerAIRow("r1", "sub-ai", "subagent:general-purpose"),
		row("r1", runevents.EventLLMAIResponse, runevents.CategoryMessage, `{"role":"assistant","id":"sub-ai-role"}`, `{"caller":"subagent:research"}`),
		toolRow("r1", "sub-tool", `{"caller":"subagent:research","task_id":"task-1","message_index":2}`),
		toolRow("r1", "task-result", `{"subagent_status":"completed"}`),
		callerAIRow("r1", "title", "middleware:title"),
		toolRow("r1", "mw-tool", `{"caller":"middleware:guardrail"}`),
		aiRow("r1", "final"),
	)
	p := env.page(t, "")
	if got := fmt.Sprint(ids(p.Data)); got != "[h1 lead-task-call sub-tool task-result final]" {
		t.Errorf("visible rows %s", got)
	}
	legacy := env.legacy(t, "")
	if len(legacy) != 9 {
		t.Errorf("legacy feed: %d rows, want all 9 (it hides superseded runs only)", len(legacy))
	}
	// A non-AI row comes back as stored, plus feedback null.
	stored, _ := env.events.ListEvents(t.Context(), runevents.ListEventsParams{ThreadID: "t1", RunID: "r1", Owner: runevents.AnyOwner, Limit: 100})
	want, _ := stored[4].MarshalJSON()
	var wrapped struct {
		Data []json.RawMessage `json:"data"`
	}
	json.Unmarshal(env.get(t, "/api/threads/t1/messages/page", "").Body.Bytes(), &wrapped)
	if got := string(wrapped.Data[2]); got != strings.TrimSuffix(string(want), "}")+`,"feedback":null}` {
		t.Errorf("tool row\n%s\nwant the stored row\n%s", got, want)
	}
}

func TestPageProductionBatch(t *testing.T) {
	t.Parallel()
	counting := &countingStore{RunEventStore: memory.NewRunEventStore()}
	env := newThreadEnv(t, func(c *envConfig) { c.RunEvents = counting })
	env.events = counting.RunEventStore
	events := []runevents.NewEvent{aiRow("r1", "old")}
	for i := range 402 {
		events = append(events, callerAIRow("r1", fmt.Sprint("mw", i), "middleware:title"))
	}
	events = append(events, humanRow("r2", "new-h"), aiRow("r2", "new-a"))
	env.seed(t, events...)
	counting.calls.Store(0)
	p := env.page(t, "?limit=2")
	if fmt.Sprint(wireSeqs(p.Data)) != "[404 405]" || !p.HasMore || p.NextBeforeSeq == nil || *p.NextBeforeSeq != 404 {
		t.Errorf("page %v has_more %v next %v", wireSeqs(p.Data), p.HasMore, p.NextBeforeSeq)
	}
	if n := counting.calls.Load(); n != 3 {
		t.Errorf("%d ListMessages calls, want 3 batches of 201", n)
	}
}

// countingStore counts ListMessages calls.
type countingStore struct {
	*memory.RunEventStore
	calls atomic.Int64
}

func (s *countingStore) ListMessages(ctx context.Context, p runevents.ListMessagesParams) ([]runevents.Record, error) {
	s.calls.Add(1)
	return s.RunEventStore.ListMessages(ctx, p)
}

func TestHiddenRuns(t *testing.T) { forEachThreadBackend(t, testHiddenRuns) }

func testHiddenRuns(t *testing.T, b threadBackend) {
	t.Parallel()
	regen := func(run, source string, status runevents.RunStatus, edit bool) runevents.ThreadRun {
		meta := fmt.Sprintf(`{"regenerate_from_run_id":%q}`, source)
		if edit {
			meta = fmt.Sprintf(`{"regenerate_from_run_id":%q,"replay_kind":"edit"}`, source)
		}
		return runevents.ThreadRun{RunID: run, Status: status, Metadata: json.RawMessage(meta)}
	}
	for _, tc := range []struct {
		name string
		runs []runevents.ThreadRun
		rows []runevents.NewEvent
		want string
	}{
		{"superseded", []runevents.ThreadRun{regen("run-x", "run-a", runevents.RunSuccess, false), regen("run-y", "run-b", runevents.RunSuccess, false)},
			[]runevents.NewEvent{aiRow("run-a", "a"), aiRow("run-b", "b"), aiRow("run-c", "c")}, "[c]"},
		{"failed regeneration keeps its source", []runevents.ThreadRun{regen("run-x", "run-a", runevents.RunError, false), {RunID: "run-x2", Status: runevents.RunSuccess, OperationKind: "title", Metadata: json.RawMessage(`{"regenerate_from_run_id":"run-a"}`)}},
			[]runevents.NewEvent{aiRow("run-a", "a"), aiRow("run-x", "x")}, "[a x]"},
		{"edit visibility", []runevents.ThreadRun{
			{RunID: "source-success"}, regen("edit-success", "source-success", runevents.RunSuccess, true),
			{RunID: "source-failed"}, regen("edit-failed", "source-failed", runevents.RunError, true)},
			[]runevents.NewEvent{aiRow("source-success", "source-success"), aiRow("edit-success", "edit-success"), aiRow("source-failed", "source-failed"), aiRow("edit-failed", "edit-failed")},
			"[edit-success source-failed]"},
		{"latest edit attempt decides", []runevents.ThreadRun{
			regen("e1", "src", runevents.RunError, true), regen("e2", "src", runevents.RunRunning, true),
			regen("f1", "src2", runevents.RunRunning, true), regen("f2", "src2", runevents.RunTimeout, true)},
			[]runevents.NewEvent{aiRow("src", "src"), aiRow("e1", "e1"), aiRow("e2", "e2"), aiRow("src2", "src2"), aiRow("f1", "f1"), aiRow("f2", "f2")},
			"[e2 src2 f1]"},
		{"branch seed", []runevents.ThreadRun{regen("live", "seed-2", runevents.RunSuccess, false)},
			[]runevents.NewEvent{humanRow("seed-1", "h1"), aiRow("seed-1", "a1"), humanRow("seed-2", "h2"), aiRow("seed-2", "a2"), humanRow("live", "h2"), aiRow("live", "a2-new")},
			"[h1 a1 h2 a2-new]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			env := newThreadEnvOn(t, b)
			for i, r := range tc.runs {
				env.putRun(t, r, i, 1)
			}
			env.seed(t, tc.rows...)
			p := env.page(t, "?limit=2")
			all := env.page(t, "?limit=200")
			if got := fmt.Sprint(ids(all.Data)); got != tc.want {
				t.Errorf("page rows %s, want %s", got, tc.want)
			}
			if n := len(strings.Fields(strings.Trim(tc.want, "[]"))); len(p.Data) != min(n, 2) || p.HasMore != (n > 2) {
				t.Errorf("limit 2: %v has_more %v", ids(p.Data), p.HasMore)
			}
			if got := fmt.Sprint(ids(env.legacy(t, "?limit=200"))); got != tc.want {
				t.Errorf("legacy rows %s, want %s", got, tc.want)
			}
		})
	}
}

func TestPageFeedbackOnTheThreadsLastVisibleAIRow(t *testing.T) {
	forEachThreadBackend(t, testPageFeedbackOnTheThreadsLastVisibleAIRow)
}

func testPageFeedbackOnTheThreadsLastVisibleAIRow(t *testing.T, b threadBackend) {
	t.Parallel()
	env := newThreadEnvOn(t, b)
	env.putRun(t, runevents.ThreadRun{RunID: "r1"}, 0, 3)
	env.putRun(t, runevents.ThreadRun{RunID: "r2"}, 1, 3)
	env.seed(t, aiRow("r1", "draft"), humanRow("r1", "h"), aiRow("r1", "final"), callerAIRow("r1", "title", "middleware:title"),
		humanRow("r2", "h2"), aiRow("r2", "r2-answer"))
	if rec := env.do(t, "PUT", "/api/threads/t1/runs/r1/feedback", `{"rating":1,"comment":"good"}`); rec.Code != 200 {
		t.Fatal(rec.Body)
	}
	fb := decodeAs[map[string]any](t, env.do(t, "PUT", "/api/threads/t1/runs/r1/feedback", `{"rating":1,"comment":"good"}`))
	env.do(t, "PUT", "/api/threads/t1/runs/r2/feedback", `{"rating":-1}`, testUserHeader, "bob")
	p := env.page(t, "")
	want := fmt.Sprintf(`{"feedback_id":%q,"rating":1,"comment":"good"}`, fb["feedback_id"])
	for _, r := range p.Data {
		got := string(r.Feedback)
		switch contentID(r) {
		case "final":
			if got != want {
				t.Errorf("final row feedback %s, want %s", got, want)
			}
		default:
			if got != "null" {
				t.Errorf("row %s feedback %s, want null", contentID(r), got)
			}
		}
	}
	// The draft is not the run's last visible AI row, even alone on a page.
	p = env.page(t, "?limit=1&before_seq=2")
	if len(p.Data) != 1 || contentID(p.Data[0]) != "draft" || string(p.Data[0].Feedback) != "null" {
		t.Errorf("page of the draft: %+v", p.Data)
	}
}

func TestLegacyFeedback(t *testing.T) { forEachThreadBackend(t, testLegacyFeedback) }

func testLegacyFeedback(t *testing.T, b threadBackend) {
	t.Parallel()
	env := newThreadEnvOn(t, b)
	env.putRun(t, runevents.ThreadRun{RunID: "r1"}, 0, 3)
	env.putRun(t, runevents.ThreadRun{RunID: "r2"}, 1, 3)
	env.seed(t, humanRow("r1", "h1"), aiRow("r1", "a1"), callerAIRow("r1", "mw", "middleware:title"),
		humanRow("r2", "h2"), row("r2", runevents.EventLegacyAIMessage, runevents.CategoryMessage, `{"type":"ai","id":"legacy"}`, `{}`))
	env.do(t, "PUT", "/api/threads/t1/runs/r1/feedback", `{"rating":1,"comment":"nice"}`)
	env.do(t, "PUT", "/api/threads/t1/runs/r2/feedback", `{"rating":1}`)
	for _, r := range env.legacy(t, "") {
		hasFeedback := string(r.Feedback) != "null"
		// The last llm.ai.response of r1 is the middleware row, which the
		// user is not shown: the answer before it carries the feedback
		// (DeerFlow puts it on the middleware row). The legacy alias never
		// carries feedback here (the contract's documented limitation).
		if hasFeedback != (contentID(r) == "a1") {
			t.Errorf("row %s feedback %s", contentID(r), r.Feedback)
		}
	}
	// The page endpoint puts it on the last visible AI row, the legacy alias included.
	for _, r := range env.page(t, "").Data {
		if hasFeedback := string(r.Feedback) != "null"; hasFeedback != (contentID(r) == "a1" || contentID(r) == "legacy") {
			t.Errorf("page row %s feedback %s", contentID(r), r.Feedback)
		}
	}
}

func TestLegacyCursors(t *testing.T) { forEachThreadBackend(t, testLegacyCursors) }

func testLegacyCursors(t *testing.T, b threadBackend) {
	t.Parallel()
	env := newThreadEnvOn(t, b)
	env.putRun(t, runevents.ThreadRun{RunID: "hidden-by", Metadata: json.RawMessage(`{"regenerate_from_run_id":"gone"}`)}, 0, 1)
	var events []runevents.NewEvent
	for i := range 30 {
		run := "r1"
		if i%3 == 1 {
			run = "gone"
		}
		events = append(events, aiRow(run, fmt.Sprint(i)))
	}
	recs := env.seed(t, events...)
	visible := func(after, before int64, limit int, backward bool) []int64 {
		var out []int64
		for _, r := range recs {
			if r.RunID != "gone" && r.Seq > after && (before == 0 || r.Seq < before) {
				out = append(out, r.Seq)
			}
		}
		if len(out) > limit {
			if backward {
				out = out[len(out)-limit:]
			} else {
				out = out[:limit]
			}
		}
		return out
	}
	for _, tc := range []struct {
		query         string
		after, before int64
		limit         int
		backward      bool
	}{
		{"?limit=5", 0, 0, 5, true},
		{"?limit=5&before_seq=10", 0, 10, 5, true},
		{"?limit=5&after_seq=10", 10, 0, 5, false},
		{"?limit=50&after_seq=3&before_seq=20", 3, 20, 50, false},
		{"?limit=4&after_seq=3&before_seq=20", 3, 20, 4, false},
		{"?after_seq=29", 29, 0, 50, false},
	} {
		if got := wireSeqs(env.legacy(t, tc.query)); fmt.Sprint(got) != fmt.Sprint(visible(tc.after, tc.before, tc.limit, tc.backward)) {
			t.Errorf("legacy%s = %v, want %v", tc.query, got, visible(tc.after, tc.before, tc.limit, tc.backward))
		}
	}
}

func TestTurnDuration(t *testing.T) { forEachThreadBackend(t, testTurnDuration) }

func testTurnDuration(t *testing.T, b threadBackend) {
	t.Parallel()
	env := newThreadEnvOn(t, b)
	env.putRun(t, runevents.ThreadRun{RunID: "r1"}, 0, 7)
	env.putRun(t, runevents.ThreadRun{RunID: "r2"}, 1, 5)
	kwargsNull := row("r2", runevents.EventLLMAIResponse, runevents.CategoryMessage, `{"type":"ai","id":"r2-last","additional_kwargs":null,"content":"<b>&</b>"}`, `{"caller":"lead_agent"}`)
	env.seed(t, humanRow("r1", "h1"), aiRow("r1", "a1"), toolRow("r1", "t1", `{}`), aiRow("r1", "a2"), callerAIRow("r1", "title", "middleware:title"),
		humanRow("r2", "h2"), aiRow("r2", "r2-first"), kwargsNull, aiRow("r3", "no-run-row"))
	before := env.snapshot(t, "t1")
	want := map[string]int64{"a2": 7, "r2-last": 5}
	check := func(what string, rows []wireRow) {
		t.Helper()
		for _, r := range rows {
			d, ok := want[contentID(r)]
			if !ok {
				d = -1
			}
			if got := turnDuration(r); got != d {
				t.Errorf("%s: row %s turn_duration %d, want %d", what, contentID(r), got, d)
			}
		}
	}
	check("page", env.page(t, "").Data)
	check("legacy", env.legacy(t, ""))
	// Stamping is page-local: a page without a run's last AI row stamps
	// the last one it has.
	p := env.page(t, "?before_seq=4")
	if len(p.Data) != 3 || turnDuration(p.Data[1]) != 7 {
		t.Errorf("older page: %v durations %d", ids(p.Data), turnDuration(p.Data[1]))
	}
	for _, r := range env.page(t, "").Data {
		var c struct {
			Content any `json:"content"`
		}
		json.Unmarshal(r.Content, &c)
		if contentID(r) == "r2-last" && c.Content != "<b>&</b>" {
			t.Errorf("stamped content changed: %s", r.Content)
		}
	}
	if after := env.snapshot(t, "t1"); after != before {
		t.Errorf("the history endpoints modified stored rows:\n%s\nwas\n%s", after, before)
	}
}

func TestHistoryParameters(t *testing.T) { forEachThreadBackend(t, testHistoryParameters) }

func testHistoryParameters(t *testing.T, b threadBackend) {
	t.Parallel()
	env := newThreadEnvOn(t, b)
	env.seed(t, aiRow("r1", "a"))
	for _, q := range []string{"after_seq=1", "after_seq=", "limit=0", "limit=201", "limit=-1", "limit=x", "before_seq=0", "before_seq=-1", "limit=1&limit=2"} {
		wantError(t, env.do(t, "GET", "/api/threads/t1/messages/page?"+q, ""), 422, runstream.CodeValidationFailed)
	}
	for _, q := range []string{"limit=0", "limit=201", "before_seq=0", "after_seq=0", "after_seq=-3", "after_seq=x"} {
		wantError(t, env.do(t, "GET", "/api/threads/t1/messages?"+q, ""), 422, runstream.CodeValidationFailed)
	}
	for _, q := range []string{"limit=1", "limit=200", "before_seq=1"} {
		env.get(t, "/api/threads/t1/messages/page?"+q, "")
		env.get(t, "/api/threads/t1/messages?"+q, "")
	}
	// A cursor past int64 is told the range, not a bound it meets.
	for q, want := range map[string]string{
		"before_seq=99999999999999999999":  "before_seq: must be an integer from 1 to 9223372036854775807",
		"before_seq=-99999999999999999999": "before_seq: must be an integer from 1 to 9223372036854775807",
		"before_seq=0":                     "before_seq: must be an integer >= 1",
	} {
		if body := wantError(t, env.do(t, "GET", "/api/threads/t1/messages/page?"+q, ""), 422, runstream.CodeValidationFailed); body.Message != want {
			t.Errorf("%s: message %q, want %q", q, body.Message, want)
		}
	}
	wantError(t, env.do(t, "GET", "/api/threads/bad.id/messages/page", ""), 422, runstream.CodeValidationFailed)
	if rec := env.do(t, "GET", "/api/threads/t-none/messages/page", ""); rec.Code != 200 || strings.TrimSpace(rec.Body.String()) != `{"data":[],"has_more":false,"next_before_seq":null}` {
		t.Errorf("unknown thread's page: %d %s, want the empty page", rec.Code, rec.Body)
	}
}

// TestPageThroughAThousandVisibleRows pages backward through 1,000 visible
// messages interleaved with 5,000 hidden rows (middleware rows, subagent
// AI rows, rows of superseded runs, rows of other categories): every
// visible row comes back exactly once, in order.
func TestPageThroughAThousandVisibleRows(t *testing.T) {
	forEachThreadBackend(t, testPageThroughAThousandVisibleRows)
}

func testPageThroughAThousandVisibleRows(t *testing.T, b threadBackend) {
	t.Parallel()
	env := newThreadEnvOn(t, b)
	for k := range 5 {
		env.putRun(t, runevents.ThreadRun{RunID: fmt.Sprint("regen-", k), Metadata: json.RawMessage(fmt.Sprintf(`{"regenerate_from_run_id":"old-%d"}`, k))}, k, 1)
	}
	var events []runevents.NewEvent
	var want []string
	for i := range 6000 {
		run := fmt.Sprint("v-", i/600)
		id := fmt.Sprint("row-", i)
		switch i % 6 {
		case 0:
			events = append(events, aiRow(run, id))
			want = append(want, id)
		case 1:
			events = append(events, callerAIRow(run, id, "middleware:title"))
		case 2:
			events = append(events, callerAIRow(run, id, "subagent:general-purpose"))
		case 3:
			events = append(events, humanRow(fmt.Sprint("old-", i%5), id))
		case 4:
			events = append(events, traceRow(run))
		case 5:
			events = append(events, toolRow(run, id, `{"caller":"middleware:guardrail"}`))
		}
	}
	for len(events) > 0 {
		n := min(len(events), 700)
		env.seed(t, events[:n]...)
		events = events[n:]
	}
	for _, limit := range []int{50, 37, 200} {
		var got []string
		query := fmt.Sprintf("?limit=%d", limit)
		for pages := 0; ; pages++ {
			if pages > 1000/limit+2 {
				t.Fatalf("limit %d: too many pages", limit)
			}
			p := env.page(t, query)
			got = append(ids(p.Data), got...)
			if !p.HasMore {
				if p.NextBeforeSeq != nil {
					t.Errorf("last page has next_before_seq %d", *p.NextBeforeSeq)
				}
				break
			}
			query = fmt.Sprintf("?limit=%d&before_seq=%d", limit, *p.NextBeforeSeq)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("limit %d: paged %d rows, want the %d visible ones exactly once in order", limit, len(got), len(want))
		}
	}
}
