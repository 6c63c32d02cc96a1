package deerflowcompat

import (
	"testing"
)

// The frontend's feedback calls (core/api/feedback.ts): upsertFeedback
// PUTs {rating, comment: null, tags: []} and reads the FeedbackData back;
// deleteFeedback DELETEs and accepts 200 or 404.
func TestFrontendFeedback(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *client) {
		c.run("t1", "r1", "success", nil)
		c.post("t1", "r1", human("h1", "q"), ai("a1", "answer", "lead_agent", 3, 4))
		up := c.want(200, "PUT", "/api/threads/t1/runs/r1/feedback", map[string]any{"rating": 1, "comment": nil, "tags": []string{}}).(map[string]any)
		id, _ := up["feedback_id"].(string)
		if id == "" || up["rating"] != 1.0 || up["comment"] != nil || !sameJSON(up["tags"], []any{}) {
			t.Errorf("upsert = %v", up)
		}
		down := c.want(200, "PUT", "/api/threads/t1/runs/r1/feedback", map[string]any{"rating": -1, "comment": "slow", "tags": []string{"slow", "incorrect"}}).(map[string]any)
		if down["feedback_id"] != id || down["rating"] != -1.0 || down["comment"] != "slow" || !sameJSON(down["tags"], []string{"slow", "incorrect"}) {
			t.Errorf("second upsert = %v; want the same feedback_id %s, rating -1, the tags", down, id)
		}
		// The history row carries FeedbackData {feedback_id, rating, comment, tags}.
		rows := c.want(200, "GET", "/api/threads/t1/messages/page", nil).(map[string]any)["data"].([]any)
		want := map[string]any{"feedback_id": id, "rating": -1, "comment": "slow", "tags": []string{"slow", "incorrect"}}
		if got := rows[1].(map[string]any)["feedback"]; !sameJSON(got, want) {
			t.Errorf("history feedback = %v, want %v", got, want)
		}
		c.want(200, "DELETE", "/api/threads/t1/runs/r1/feedback", nil)
		c.detail(404, "DELETE", "/api/threads/t1/runs/r1/feedback", nil, "No feedback found for this run")
		if got := c.want(200, "GET", "/api/threads/t1/messages/page", nil).(map[string]any)["data"].([]any)[1].(map[string]any)["feedback"]; got != nil {
			t.Errorf("feedback after the un-rate = %v, want null", got)
		}
		c.detail(400, "PUT", "/api/threads/t1/runs/r1/feedback", map[string]any{"rating": 0}, "rating must be +1 or -1")
		if got := locs(c.want(422, "PUT", "/api/threads/t1/runs/r1/feedback", map[string]any{"rating": "up"})); !sameJSON(got, [][]any{{"body", "rating"}}) {
			t.Errorf("string rating: detail locs %v, want [[body rating]]", got)
		}
		if got := locs(c.want(422, "PUT", "/api/threads/t1/runs/r1/feedback", map[string]any{"rating": 1, "tags": []string{"boring"}})); !sameJSON(got, [][]any{{"body", "tags"}}) {
			t.Errorf("unknown tag: detail locs %v, want [[body tags]]", got)
		}
		c.detail(404, "PUT", "/api/threads/t1/runs/nope/feedback", map[string]any{"rating": 1}, "Run nope not found")
	})
}

// The feedback router (routers/feedback.py) with test_feedback.py's
// repository assertions replayed over HTTP: create with message_id,
// list, stats, delete by id; GET /api/runs/{run_id}/feedback lists every
// row of the run.
func TestFeedbackRouter(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *client) {
		c.run("t1", "r1", "success", nil)
		c.run("t1", "r2", "success", nil)
		stats := map[string]any{"run_id": "r1", "total": 0, "positive": 0, "negative": 0}
		if got := c.want(200, "GET", "/api/threads/t1/runs/r1/feedback/stats", nil); !sameJSON(got, stats) {
			t.Errorf("empty stats = %v", got)
		}
		if got := c.want(200, "GET", "/api/threads/t1/runs/r1/feedback", nil); !sameJSON(got, []any{}) {
			t.Errorf("empty list = %v", got)
		}
		created := c.want(200, "POST", "/api/threads/t1/runs/r1/feedback", map[string]any{"rating": 1, "message_id": "msg-42"}).(map[string]any)
		for k, v := range map[string]any{"rating": 1.0, "run_id": "r1", "thread_id": "t1", "user_id": "alice", "message_id": "msg-42", "comment": nil} {
			if created[k] != v {
				t.Errorf("created %s = %v, want %v", k, created[k], v)
			}
		}
		if created["feedback_id"] == nil || created["created_at"] == nil {
			t.Errorf("created lacks feedback_id or created_at: %v", created)
		}
		negative := c.want(200, "POST", "/api/threads/t1/runs/r1/feedback", map[string]any{"rating": -1, "comment": "Response was inaccurate"}).(map[string]any)
		if negative["rating"] != -1.0 || negative["comment"] != "Response was inaccurate" || negative["message_id"] != nil || negative["feedback_id"] == created["feedback_id"] {
			t.Errorf("negative = %v", negative)
		}
		c.want(200, "POST", "/api/threads/t1/runs/r2/feedback", map[string]any{"rating": 1})
		list := c.want(200, "GET", "/api/threads/t1/runs/r1/feedback", nil).([]any)
		if len(list) != 2 || list[0].(map[string]any)["feedback_id"] != created["feedback_id"] || list[1].(map[string]any)["feedback_id"] != negative["feedback_id"] {
			t.Errorf("list = %v; want the two of r1, oldest first", list)
		}
		stats = map[string]any{"run_id": "r1", "total": 2, "positive": 1, "negative": 1}
		if got := c.want(200, "GET", "/api/threads/t1/runs/r1/feedback/stats", nil); !sameJSON(got, stats) {
			t.Errorf("stats = %v, want %v", got, stats)
		}
		if got := c.want(200, "GET", "/api/runs/r1/feedback", nil); !sameJSON(got, list) {
			t.Errorf("GET /api/runs/r1/feedback = %v, want the thread route's list", got)
		}
		c.detail(400, "POST", "/api/threads/t1/runs/r1/feedback", map[string]any{"rating": 5}, "rating must be +1 or -1")
		c.detail(400, "POST", "/api/threads/t1/runs/r1/feedback", map[string]any{"rating": 0}, "rating must be +1 or -1")
		if got := locs(c.want(422, "POST", "/api/threads/t1/runs/r1/feedback", map[string]any{"comment": "no rating"})); !sameJSON(got, [][]any{{"body", "rating"}}) {
			t.Errorf("missing rating: detail locs %v", got)
		}
		c.detail(404, "POST", "/api/threads/t1/runs/nope/feedback", map[string]any{"rating": 1}, "Run nope not found")
		c.detail(404, "POST", "/api/threads/t9/runs/r1/feedback", map[string]any{"rating": 1}, "Run r1 not found")

		// Delete by id: success, then 404; another run's id is not found
		// on this run.
		id := created["feedback_id"].(string)
		c.detail(404, "DELETE", "/api/threads/t1/runs/r2/feedback/"+id, nil, "Feedback "+id+" not found")
		if got := c.want(200, "DELETE", "/api/threads/t1/runs/r1/feedback/"+id, nil); !sameJSON(got, map[string]any{"success": true}) {
			t.Errorf("delete = %v", got)
		}
		c.detail(404, "DELETE", "/api/threads/t1/runs/r1/feedback/"+id, nil, "Feedback "+id+" not found")
		c.want(404, "DELETE", "/api/threads/t1/runs/r1/feedback/nonexistent", nil)

		// Every row of the run, within the caller's isolation: bob rates
		// nothing of alice's and sees none of it.
		c.as("bob").detail(404, "POST", "/api/threads/t1/runs/r1/feedback", map[string]any{"rating": 1}, "Run r1 not found")
		c.as("bob").detail(404, "GET", "/api/runs/r1/feedback", nil, "Run r1 not found")
		if got := c.as("bob").want(200, "GET", "/api/threads/t1/runs/r1/feedback/stats", nil); !sameJSON(got, map[string]any{"run_id": "r1", "total": 0, "positive": 0, "negative": 0}) {
			t.Errorf("bob's stats of alice's run = %v, want zeros", got)
		}
		if got := c.as("bob").want(200, "GET", "/api/threads/t1/runs/r1/feedback", nil); !sameJSON(got, []any{}) {
			t.Errorf("bob's list of alice's run = %v, want []", got)
		}
		c.as("bob").want(404, "DELETE", "/api/threads/t1/runs/r1/feedback/"+negative["feedback_id"].(string), nil)
		if got := c.want(200, "GET", "/api/threads/t1/runs/r1/feedback/stats", nil).(map[string]any)["total"]; got != 1.0 {
			t.Errorf("stats total after one delete = %v, want 1", got)
		}
	})
}

// A run's history row shows the rating the frontend's thumbs set and
// un-rate (PUT and DELETE .../runs/{run_id}/feedback: the whole run's),
// even when a rating of one message (POST with message_id) is newer.
// DeerFlow keys the feedback of the page by run (routers/thread_runs.py
// with the feedback repository's list_by_run_ids), on the run's last
// visible AI row of the thread; its store holds one feedback per user and
// run, so it never has both. Without a rating of the run, the row shows
// a rating of a message (the newest), as DeerFlow shows the run's one
// row whatever its message_id. The legacy /messages feed answers the same.
func TestHistoryShowsTheRunsRating(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *client) {
		c.run("t1", "r1", "success", nil)
		c.post("t1", "r1", human("h1", "q"), ai("a1", "draft", "lead_agent", 3, 4), human("h2", "more"), ai("a2", "answer", "lead_agent", 5, 6))
		run := c.want(200, "PUT", "/api/threads/t1/runs/r1/feedback", map[string]any{"rating": 1, "comment": "good"}).(map[string]any)
		msg := c.want(200, "POST", "/api/threads/t1/runs/r1/feedback", map[string]any{"rating": -1, "comment": "wrong", "message_id": "a2"}).(map[string]any)
		other := c.want(200, "POST", "/api/threads/t1/runs/r1/feedback", map[string]any{"rating": -1, "message_id": "a1"}).(map[string]any)
		shown := func(want any) {
			t.Helper()
			page := c.want(200, "GET", "/api/threads/t1/messages/page", nil).(map[string]any)["data"].([]any)
			legacy := c.want(200, "GET", "/api/threads/t1/messages", nil).([]any)
			for name, rows := range map[string][]any{"/messages/page": page, "/messages": legacy} {
				if len(rows) != 4 {
					t.Fatalf("%s: %d rows, want 4", name, len(rows))
				}
				for i, row := range rows {
					got := row.(map[string]any)["feedback"]
					switch {
					case i == 3 && !sameJSON(got, want):
						t.Errorf("%s: the last AI row's feedback = %v, want %v", name, got, want)
					case i < 3 && got != nil:
						t.Errorf("%s: row %d has feedback %v, want null (only the run's last AI row carries it)", name, i, got)
					}
				}
			}
		}
		shown(map[string]any{"feedback_id": run["feedback_id"], "rating": 1, "comment": "good"})
		c.want(200, "DELETE", "/api/threads/t1/runs/r1/feedback/"+run["feedback_id"].(string), nil)
		c.want(200, "DELETE", "/api/threads/t1/runs/r1/feedback/"+other["feedback_id"].(string), nil)
		shown(map[string]any{"feedback_id": msg["feedback_id"], "rating": -1, "comment": "wrong"})
		c.want(200, "DELETE", "/api/threads/t1/runs/r1/feedback", nil) // the un-rate removes every rating of the caller's on the run
		shown(nil)
	})
}
