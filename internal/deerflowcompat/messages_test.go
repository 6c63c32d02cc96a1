package deerflowcompat

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
)

// The thread history the frontend reads (core/threads: GET
// /messages/page), with the assertions of test_thread_messages_page.py.
func TestMessagesPage(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *client) {
		// A new chat: DeerFlow answers the empty page, not 404
		// ("Failed to load thread history.").
		empty := map[string]any{"data": []any{}, "has_more": false, "next_before_seq": nil}
		if got := c.want(200, "GET", "/api/threads/t-new/messages/page", nil); !sameJSON(got, empty) {
			t.Errorf("empty thread page = %v", got)
		}
		// 6 rows across 3 runs, limit=3 → [4,5,6], has_more, next 4; then [1,2,3].
		for i := 1; i <= 3; i++ {
			run := fmt.Sprintf("r%d", i)
			c.run("t1", run, "success", nil)
			c.post("t1", run, human(fmt.Sprintf("h%d", i), "question"), ai(fmt.Sprintf("a%d", i), "answer", "lead_agent", 10, 5))
		}
		page := c.want(200, "GET", "/api/threads/t1/messages/page?limit=3", nil).(map[string]any)
		if !slices.Equal(seqsOf(page), []int{4, 5, 6}) || page["has_more"] != true || page["next_before_seq"] != 4.0 {
			t.Errorf("limit=3 page = %v %v %v; want [4 5 6] true 4", seqsOf(page), page["has_more"], page["next_before_seq"])
		}
		page = c.want(200, "GET", "/api/threads/t1/messages/page?limit=3&before_seq=4", nil).(map[string]any)
		if !slices.Equal(seqsOf(page), []int{1, 2, 3}) || page["has_more"] != false || page["next_before_seq"] != nil {
			t.Errorf("before_seq=4 page = %v %v %v; want [1 2 3] false null", seqsOf(page), page["has_more"], page["next_before_seq"])
		}
		// Exactly limit rows: has_more false.
		if page := c.want(200, "GET", "/api/threads/t1/messages/page?limit=6", nil).(map[string]any); page["has_more"] != false {
			t.Errorf("exactly limit rows: has_more %v", page["has_more"])
		}
		// Feedback lands on each run's last AI row only; every other row
		// carries feedback null.
		c.want(200, "PUT", "/api/threads/t1/runs/r3/feedback", map[string]any{"rating": 1, "comment": "good"})
		rows := c.want(200, "GET", "/api/threads/t1/messages/page", nil).(map[string]any)["data"].([]any)
		for _, r := range rows {
			row := r.(map[string]any)
			fb, has := row["feedback"]
			switch {
			case !has:
				t.Errorf("row %v has no feedback member", row["seq"])
			case row["seq"] == 6.0:
				f, _ := fb.(map[string]any)
				if f["rating"] != 1.0 || f["comment"] != "good" || f["feedback_id"] == nil {
					t.Errorf("last AI row of r3: feedback %v", fb)
				}
			case fb != nil:
				t.Errorf("row %v: feedback %v, want null", row["seq"], fb)
			}
		}

		// Middleware rows and subagent AI rows are hidden; the lead's task
		// call, the subagent's tool result (with subagent_status) and the
		// lead's answer stay, in order.
		c.run("t2", "r1", "success", nil)
		c.post("t2", "r1", human("h1", "go"), ai("a1", "", "lead_agent", 5, 5), middleware("title"),
			ai("s1", "sub", "subagent:general-purpose", 5, 5), tool("call-1", "done", map[string]any{"subagent_status": "completed"}),
			middleware("title"), ai("a2", "final", "lead_agent", 5, 5), middleware("title"))
		page = c.want(200, "GET", "/api/threads/t2/messages/page?limit=10", nil).(map[string]any)
		if !slices.Equal(seqsOf(page), []int{1, 2, 5, 7}) {
			t.Errorf("hidden rows: page %v, want [1 2 5 7]", seqsOf(page))
		}
		page = c.want(200, "GET", "/api/threads/t2/messages/page?limit=2", nil).(map[string]any)
		if !slices.Equal(seqsOf(page), []int{5, 7}) || page["has_more"] != true || page["next_before_seq"] != 5.0 {
			t.Errorf("hidden rows, limit=2: %v %v %v; want [5 7] true 5", seqsOf(page), page["has_more"], page["next_before_seq"])
		}

		// Superseded runs: a successful regenerate hides its source run.
		for i, run := range []string{"ra", "rb", "rc"} {
			c.run("t3", run, "success", map[string]any{"created_at": fmt.Sprintf("2026-01-01T00:00:0%dZ", i)})
			c.post("t3", run, ai("m-"+run, "answer", "lead_agent", 1, 1))
		}
		c.run("t3", "rc", "success", map[string]any{"created_at": "2026-01-01T00:00:02Z", "metadata": map[string]any{"regenerate_from_run_id": "rb"}})
		c.run("t3", "rd", "success", map[string]any{"metadata": map[string]any{"regenerate_from_run_id": "ra"}})
		page = c.want(200, "GET", "/api/threads/t3/messages/page?limit=2", nil).(map[string]any)
		if !slices.Equal(seqsOf(page), []int{3}) || page["has_more"] != false {
			t.Errorf("superseded: %v %v; want only rc's [3], has_more false", seqsOf(page), page["has_more"])
		}

		// Another user's thread reads as an empty one.
		if got := c.as("bob").want(200, "GET", "/api/threads/t1/messages/page", nil); !sameJSON(got, empty) {
			t.Errorf("bob reads alice's thread: %v, want the empty page", got)
		}

		// Validation: after_seq is DeerFlow's own string detail; limit and
		// before_seq are FastAPI's list naming the query parameter.
		c.detail(422, "GET", "/api/threads/t1/messages/page?after_seq=1", nil, "after_seq is not supported by this backward-only endpoint")
		c.detail(422, "GET", "/api/threads/t1/messages/page?after_seq=", nil, "after_seq is not supported by this backward-only endpoint")
		for q, param := range map[string]string{"limit=0": "limit", "limit=201": "limit", "before_seq=0": "before_seq",
			// FastAPI validates the declared parameters before the
			// handler looks for after_seq.
			"limit=0&after_seq=1": "limit", "before_seq=0&after_seq=1": "before_seq"} {
			if got := locs(c.want(422, "GET", "/api/threads/t1/messages/page?"+q, nil)); !sameJSON(got, [][]any{{"query", param}}) {
				t.Errorf("%s: detail locs %v, want [[query %s]]", q, got, param)
			}
		}
		// FastAPI lists every parameter that fails.
		if got := locs(c.want(422, "GET", "/api/threads/t1/messages/page?limit=0&before_seq=0", nil)); !sameJSON(got, [][]any{{"query", "limit"}, {"query", "before_seq"}}) {
			t.Errorf("limit=0&before_seq=0: detail locs %v, want both", got)
		}
		if got := locs(c.want(422, "GET", "/api/threads/t1/messages?limit=0&before_seq=0&after_seq=-1", nil)); !sameJSON(got, [][]any{{"query", "limit"}, {"query", "before_seq"}, {"query", "after_seq"}}) {
			t.Errorf("legacy feed, three bad parameters: detail locs %v, want all three", got)
		}
	})
}

// The legacy feed GET /messages (reference §2.1): a bare array, hidden
// runs removed, feedback on the last llm.ai.response row of each run.
func TestLegacyMessages(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *client) {
		if got := c.want(200, "GET", "/api/threads/t-new/messages", nil); !sameJSON(got, []any{}) {
			t.Errorf("empty thread feed = %v, want []", got)
		}
		c.run("t1", "r1", "success", nil)
		c.post("t1", "r1", human("h1", "q"), ai("a1", "draft", "lead_agent", 1, 1), ai("a2", "final", "lead_agent", 1, 1))
		c.want(200, "PUT", "/api/threads/t1/runs/r1/feedback", map[string]any{"rating": -1})
		rows := c.want(200, "GET", "/api/threads/t1/messages?limit=2", nil).([]any)
		if !slices.Equal(seqsOf(rows), []int{2, 3}) {
			t.Fatalf("limit=2 feed = %v, want [2 3]", seqsOf(rows))
		}
		if rows[0].(map[string]any)["feedback"] != nil || rows[1].(map[string]any)["feedback"].(map[string]any)["rating"] != -1.0 {
			t.Errorf("feed feedback = %v, %v; want null then rating -1", rows[0].(map[string]any)["feedback"], rows[1].(map[string]any)["feedback"])
		}
		if got := seqsOf(c.want(200, "GET", "/api/threads/t1/messages?after_seq=1", nil)); !slices.Equal(got, []int{2, 3}) {
			t.Errorf("after_seq=1 feed = %v, want [2 3]", got)
		}
		for _, q := range []string{"limit=0", "limit=201", "before_seq=0", "after_seq=-1"} {
			param, _, _ := strings.Cut(q, "=")
			if got := locs(c.want(422, "GET", "/api/threads/t1/messages?"+q, nil)); !sameJSON(got, [][]any{{"query", param}}) {
				t.Errorf("%s: detail locs %v", q, got)
			}
		}
	})
}

// Run message pages, with test_thread_run_messages_pagination.py's
// assertions, on the thread route (§2.3) and the stateless one (§2.4).
func TestRunMessagesPagination(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *client) {
		small := map[string]any{"data": []any{}, "has_more": false}
		for _, target := range []string{"/api/threads/t-new/runs/r-new/messages", "/api/threads/t1/runs/r1/messages"} {
			if got := c.want(200, "GET", target, nil); !sameJSON(got, small) {
				t.Errorf("%s before any row = %v", target, got)
			}
		}
		c.run("t1", "r1", "success", nil)
		var events []event
		for i := 1; i <= 61; i++ {
			events = append(events, human(fmt.Sprintf("h%d", i), "m"))
		}
		c.post("t1", "r1", events...)
		for _, base := range []string{"/api/threads/t1/runs/r1/messages", "/api/runs/r1/messages"} {
			for _, tc := range []struct {
				query   string
				want    []int
				hasMore bool
			}{
				{"", seqRange(12, 61), true},
				{"?limit=3&before_seq=4", []int{1, 2, 3}, false},
				{"?before_seq=18&limit=16", seqRange(2, 17), true},
				{"?after_seq=10", seqRange(11, 60), true},
				{"?after_seq=58", []int{59, 60, 61}, false},
			} {
				page := c.want(200, "GET", base+tc.query, nil).(map[string]any)
				if !slices.Equal(seqsOf(page), tc.want) || page["has_more"] != tc.hasMore || len(page) != 2 {
					t.Errorf("%s%s = %v has_more %v (%d members); want %v %v", base, tc.query, seqsOf(page), page["has_more"], len(page), tc.want, tc.hasMore)
				}
			}
			for _, q := range []string{"before_seq=0", "after_seq=-1", "limit=0", "limit=201"} {
				param, _, _ := strings.Cut(q, "=")
				if got := locs(c.want(422, "GET", base+"?"+q, nil)); !sameJSON(got, [][]any{{"query", param}}) {
					t.Errorf("%s?%s: detail locs %v", base, q, got)
				}
			}
		}
		c.detail(404, "GET", "/api/runs/nope/messages", nil, "Run nope not found")
		c.as("bob").detail(404, "GET", "/api/runs/r1/messages", nil, "Run r1 not found")
	})
}

// test_thread_messages_feedback.py and the turn-duration tests: feedback
// and turn_duration land on the run's thread-global last visible AI row,
// never on an earlier draft, even when the page holds only the draft.
func TestMessagesFeedbackAndDuration(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *client) {
		c.run("t1", "r1", "success", map[string]any{"created_at": "2026-03-01T10:00:00Z", "updated_at": "2026-03-01T10:00:07Z"})
		c.post("t1", "r1", ai("draft", "draft", "lead_agent", 1, 1), human("h", "more"), ai("final", "final", "lead_agent", 1, 1), middleware("title"))
		fb := c.want(200, "PUT", "/api/threads/t1/runs/r1/feedback", map[string]any{"rating": 1, "comment": "good"}).(map[string]any)
		want := map[string]any{"feedback_id": fb["feedback_id"], "rating": 1, "comment": "good"}
		rows := c.want(200, "GET", "/api/threads/t1/messages/page", nil).(map[string]any)["data"].([]any)
		if !slices.Equal(seqsOf(rows), []int{1, 2, 3}) {
			t.Fatalf("page = %v, want [1 2 3]", seqsOf(rows))
		}
		for i, r := range rows {
			row := r.(map[string]any)
			content := row["content"].(map[string]any)
			kwargs, _ := content["additional_kwargs"].(map[string]any)
			if i == 2 {
				if !sameJSON(row["feedback"], want) || kwargs["turn_duration"] != 7.0 {
					t.Errorf("final AI row: feedback %v, turn_duration %v; want %v and 7", row["feedback"], kwargs["turn_duration"], want)
				}
				continue
			}
			if row["feedback"] != nil || kwargs["turn_duration"] != nil {
				t.Errorf("row %d: feedback %v, turn_duration %v; want neither", i+1, row["feedback"], kwargs["turn_duration"])
			}
		}
		older := c.want(200, "GET", "/api/threads/t1/messages/page?before_seq=3", nil).(map[string]any)["data"].([]any)
		if draft := older[0].(map[string]any); draft["feedback"] != nil {
			t.Errorf("the draft, alone on its page, carries feedback %v", draft["feedback"])
		}
		// The run's own messages stamp its duration on its last AI row too.
		run := c.want(200, "GET", "/api/threads/t1/runs/r1/messages", nil).(map[string]any)["data"].([]any)
		final := run[2].(map[string]any)["content"].(map[string]any)["additional_kwargs"].(map[string]any)
		if final["turn_duration"] != 7.0 {
			t.Errorf("run messages: final row's turn_duration %v, want 7", final["turn_duration"])
		}
	})
}

// contentIDs returns content.id of each row of a page.
func contentIDs(page any) []string {
	var out []string
	for _, r := range page.(map[string]any)["data"].([]any) {
		id, _ := r.(map[string]any)["content"].(map[string]any)["id"].(string)
		out = append(out, id)
	}
	return out
}

// The branch-seed regression (#4458) and edit visibility of
// test_thread_messages_page.py: history seeds written as one batch across
// synthetic runs, a live run that regenerates the last seeded turn, and
// edit replays whose latest attempt decides.
func TestMessagesPageSeedsAndEdits(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *client) {
		withRun := func(run string, e event) event { e["run_id"] = run; return e }
		c.want(201, "POST", "/api/threads/t1/events", map[string]any{"events": []event{
			withRun("seed-1", human("h1", "q1")), withRun("seed-1", ai("a1", "a1", "lead_agent", 1, 1)),
			withRun("seed-2", human("h2", "q2")), withRun("seed-2", ai("a2", "a2", "lead_agent", 1, 1)),
		}})
		c.run("t1", "seed-1", "success", nil)
		c.run("t1", "seed-2", "success", nil)
		c.run("t1", "live", "success", map[string]any{"metadata": map[string]any{"regenerate_from_run_id": "seed-2"}})
		c.post("t1", "live", human("h2", "q2"), ai("a2-new", "a2 again", "lead_agent", 1, 1))
		if got := contentIDs(c.want(200, "GET", "/api/threads/t1/messages/page", nil)); !slices.Equal(got, []string{"h1", "a1", "h2", "a2-new"}) {
			t.Errorf("branch seeds = %v, want [h1 a1 h2 a2-new]", got)
		}

		edit := func(source string) map[string]any {
			return map[string]any{"metadata": map[string]any{"replay_kind": "edit", "regenerate_from_run_id": source}}
		}
		for i, run := range []struct{ id, status string }{{"source-success", "success"}, {"edit-success", "success"}, {"source-failed", "success"}, {"edit-failed", "error"}} {
			extra := map[string]any{"created_at": fmt.Sprintf("2026-02-01T00:00:0%dZ", i)}
			if strings.HasPrefix(run.id, "edit-") {
				extra = edit(strings.Replace(run.id, "edit-", "source-", 1))
				extra["created_at"] = fmt.Sprintf("2026-02-01T00:00:0%dZ", i)
			}
			c.run("t2", run.id, run.status, extra)
			c.post("t2", run.id, ai(run.id, run.id, "lead_agent", 1, 1))
		}
		if got := contentIDs(c.want(200, "GET", "/api/threads/t2/messages/page", nil)); !slices.Equal(got, []string{"edit-success", "source-failed"}) {
			t.Errorf("edit visibility = %v, want [edit-success source-failed]", got)
		}
	})
}

// A run's rating goes on its last AI row the user is shown, on the page
// and on the legacy feed: not on a subagent's AI row, a middleware's or a
// row hidden from the UI that comes after it (DeerFlow's bugs, reference
// §8.1 #9 and #10). A run row updated before it was created lasted 0 s,
// not a negative time (§8.1 #25).
func TestFeedbackGoesOnAShownRow(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *client) {
		hidden := ai("a3", "hidden", "lead_agent", 1, 1)
		hidden["content"].(map[string]any)["additional_kwargs"] = map[string]any{"hide_from_ui": true}
		title := ai("t1", "A title", "middleware:title", 1, 1)
		c.run("t1", "r1", "success", map[string]any{"created_at": "2026-03-01T10:00:10Z", "updated_at": "2026-03-01T10:00:00Z"})
		c.post("t1", "r1", human("h1", "q"), ai("a1", "answer", "lead_agent", 1, 1), ai("s1", "subagent step", "subagent:research", 1, 1), title)
		c.run("t1", "r2", "success", nil)
		c.post("t1", "r2", human("h2", "q2"), ai("a2", "shown", "lead_agent", 1, 1), hidden)
		one := c.want(200, "PUT", "/api/threads/t1/runs/r1/feedback", map[string]any{"rating": 1}).(map[string]any)
		two := c.want(200, "PUT", "/api/threads/t1/runs/r2/feedback", map[string]any{"rating": -1}).(map[string]any)
		want := map[string]string{"a1": one["feedback_id"].(string), "a2": two["feedback_id"].(string)}
		page := c.want(200, "GET", "/api/threads/t1/messages/page", nil).(map[string]any)["data"].([]any)
		legacy := c.want(200, "GET", "/api/threads/t1/messages", nil).([]any)
		for name, rows := range map[string][]any{"/messages/page": page, "/messages": legacy} {
			got := map[string]string{}
			for _, r := range rows {
				row := r.(map[string]any)
				content := row["content"].(map[string]any)
				if fb, ok := row["feedback"].(map[string]any); ok {
					got[content["id"].(string)] = fb["feedback_id"].(string)
				}
				if kwargs, ok := content["additional_kwargs"].(map[string]any); ok {
					if d, ok := kwargs["turn_duration"].(float64); ok && d < 0 {
						t.Errorf("%s: row %v has turn_duration %v", name, content["id"], d)
					}
				}
			}
			if !maps.Equal(got, want) {
				t.Errorf("%s: feedback by message id %v, want %v (each run's last shown AI row)", name, got, want)
			}
		}
		// Alone on a page, the subagent row of r1 (the newest non-middleware
		// AI row) gets nothing either: the rating stays with a1.
		older := c.want(200, "GET", "/api/threads/t1/messages?before_seq=4", nil).([]any)
		for _, r := range older {
			row := r.(map[string]any)
			if id := row["content"].(map[string]any)["id"]; row["feedback"] != nil && id != "a1" {
				t.Errorf("legacy page before seq 4: row %v carries feedback %v", id, row["feedback"])
			}
		}
	})
}
