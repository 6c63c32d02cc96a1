package deerflowcompat

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// workspaceEvent is a workspace_changes row with its payload in metadata,
// as the recorder writes it.
func workspaceEvent(payload map[string]any) event {
	return event{"event_type": "workspace_changes", "content": "1 file changed", "metadata": map[string]any{"workspace_changes": payload}}
}

// The review panel (core/workspace-changes) with
// test_workspace_changes.py's assertions.
func TestWorkspaceChanges(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *client) {
		zero := map[string]any{"created": 0, "modified": 0, "deleted": 0, "symlink_created": 0, "additions": 0, "deletions": 0, "truncated": false}
		unavailable := map[string]any{"available": false, "version": 1, "summary": zero, "files": []any{}, "limits": map[string]any{}}
		for _, target := range []string{"/api/threads/t-new/runs/r1/workspace-changes", "/api/threads/t1/runs/r1/workspace-changes"} {
			if got := c.want(200, "GET", target, nil); !sameJSON(got, unavailable) {
				t.Errorf("%s without a record = %v, want %v", target, got, unavailable)
			}
		}
		summary := map[string]any{"created": 1, "modified": 0, "deleted": 0, "symlink_created": 0, "additions": 1, "deletions": 0, "truncated": false}
		file := map[string]any{"path": "hello.txt", "root": "outputs", "status": "created", "binary": false, "sensitive": false,
			"size_before": nil, "size_after": 6, "sha256_before": nil, "sha256_after": strings.Repeat("ab", 32),
			"diff": "+hello", "diff_truncated": false, "diff_unavailable_reason": nil, "additions": 1, "deletions": 0,
			"symlink": false, "symlink_target_before": nil, "symlink_target_after": nil}
		limits := map[string]any{"max_files": 200, "max_file_bytes_for_diff": 262144, "max_scanned_files": 5000, "max_total_diff_bytes": 1048576}
		c.run("t1", "r1", "success", nil)
		c.post("t1", "r1", workspaceEvent(map[string]any{"version": 1, "summary": summary, "files": []any{file}, "limits": limits}))
		full := map[string]any{"available": true, "version": 1, "summary": summary, "files": []any{file}, "limits": limits}
		if got := c.want(200, "GET", "/api/threads/t1/runs/r1/workspace-changes", nil); !sameJSON(got, full) {
			t.Errorf("full = %v, want %v", got, full)
		}
		blank := map[string]any{}
		for k, v := range file {
			blank[k] = v
		}
		blank["diff"] = ""
		noDiff := map[string]any{"available": true, "version": 1, "summary": summary, "files": []any{blank}, "limits": limits}
		if got := c.want(200, "GET", "/api/threads/t1/runs/r1/workspace-changes?include_diff=false", nil); !sameJSON(got, noDiff) {
			t.Errorf("include_diff=false = %v", got)
		}
		summaryOnly := map[string]any{"available": true, "version": 1, "summary": summary, "files": []any{}, "limits": limits}
		if got := c.want(200, "GET", "/api/threads/t1/runs/r1/workspace-changes?include_files=false", nil); !sameJSON(got, summaryOnly) {
			t.Errorf("include_files=false = %v", got)
		}
		// A run that changed nothing.
		c.run("t1", "r2", "success", nil)
		c.post("t1", "r2", workspaceEvent(map[string]any{"version": 1, "summary": zero, "files": []any{}, "limits": limits}))
		if got := c.want(200, "GET", "/api/threads/t1/runs/r2/workspace-changes?include_diff=false", nil); !sameJSON(got, map[string]any{"available": true, "version": 1, "summary": zero, "files": []any{}, "limits": limits}) {
			t.Errorf("a run without changes = %v", got)
		}
	})
}

// The subtask card (core/tasks): a run's events filtered by type and
// task, paged by after_seq, with the legacy auth_token stripped (§2.5).
func TestTaskEvents(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *client) {
		if got := c.want(200, "GET", "/api/threads/t-new/runs/r1/events", nil); !sameJSON(got, []any{}) {
			t.Errorf("events of an unknown run = %v, want []", got)
		}
		c.run("t1", "r1", "success", nil)
		start := event{"event_type": "subagent.start", "content": map[string]any{"task_id": "task-A", "description": "collect"}, "metadata": map[string]any{"task_id": "task-A", "auth_token": "legacy-secret"}}
		c.post("t1", "r1", human("h1", "q"), start, step("task-A", 1), step("task-B", 1), step("task-A", 2), step("task-A", 3))
		base := "/api/threads/t1/runs/r1/events?event_types=subagent.start,subagent.step,subagent.end&task_id=task-A"
		rows := c.want(200, "GET", base, nil).([]any)
		if !slices.Equal(seqsOf(rows), []int{2, 3, 5, 6}) {
			t.Errorf("task-A events = %v, want [2 3 5 6]", seqsOf(rows))
		}
		if meta := rows[0].(map[string]any)["metadata"].(map[string]any); meta["auth_token"] != nil || meta["task_id"] != "task-A" {
			t.Errorf("subagent.start metadata = %v: auth_token must be stripped, task_id kept", meta)
		}
		if got := seqsOf(c.want(200, "GET", base+"&after_seq=3&limit=1", nil)); !slices.Equal(got, []int{5}) {
			t.Errorf("after_seq=3&limit=1 = %v, want [5]", got)
		}
		for _, q := range []string{"limit=0", "limit=2001", "after_seq=0"} {
			param, _, _ := strings.Cut(q, "=")
			if got := locs(c.want(422, "GET", "/api/threads/t1/runs/r1/events?"+q, nil)); !sameJSON(got, [][]any{{"query", param}}) {
				t.Errorf("%s: detail locs %v", q, got)
			}
		}
		if got := locs(c.want(422, "GET", "/api/threads/t1/runs/r1/events?limit=0&after_seq=0", nil)); !sameJSON(got, [][]any{{"query", "limit"}, {"query", "after_seq"}}) {
			t.Errorf("limit=0&after_seq=0: detail locs %v, want both", got)
		}
	})
}

// test_thread_id_route_contract.py: thread ids must match
// ^[A-Za-z0-9_-]{1,64}$; FastAPI answers 422 with the path parameter in
// detail. Errors of the thread API keep the unified members beside it.
func TestThreadIDRouteContract(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *client) {
		long := strings.Repeat("a", 65)
		for _, target := range []string{
			"/api/threads/bad.id/messages/page", "/api/threads/" + long + "/messages", "/api/threads/bad%20id/runs/r1/messages",
			"/api/threads/bad.id/token-usage", "/api/threads/bad.id/runs/r1/workspace-changes", "/api/threads/bad.id/runs",
		} {
			body := c.want(422, "GET", target, nil)
			if got := locs(body); !sameJSON(got, [][]any{{"path", "thread_id"}}) {
				t.Errorf("%s: detail locs %v, want [[path thread_id]]", target, got)
			}
			if m := body.(map[string]any); m["code"] != "VALIDATION_FAILED" || m["requestId"] == nil {
				t.Errorf("%s: unified members missing: %v", target, m)
			}
		}
		if got := locs(c.want(422, "GET", "/api/threads/t1/runs/bad.run/messages", nil)); !sameJSON(got, [][]any{{"path", "run_id"}}) {
			t.Errorf("bad run id: detail locs %v", got)
		}
		for _, ok := range []string{"abc", "A_b-9", strings.Repeat("z", 64)} {
			c.want(200, "GET", "/api/threads/"+ok+"/messages/page", nil)
		}
		// The workflow API keeps its frozen body: no detail.
		if body := c.want(404, "GET", "/api/nothing-here", nil).(map[string]any); body["detail"] != nil {
			t.Errorf("non-thread error carries detail: %v", body)
		}
	})
}

// Run rows as DeerFlow's RunResponse, and the routes of an executing run,
// which answer 409 for the runs runstream only stores.
func TestRunRows(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *client) {
		row := c.run("t1", "r1", "running", map[string]any{"assistant_id": "lead_agent", "kwargs": map[string]any{"stream_mode": []string{"values"}},
			"multitask_strategy": "enqueue", "message_count": 3, "stop_reason": nil, "model_name": "gpt-4o", "total_tokens": 9})
		for k, v := range map[string]any{"run_id": "r1", "thread_id": "t1", "assistant_id": "lead_agent", "status": "running", "multitask_strategy": "enqueue",
			"message_count": 3.0, "stop_reason": nil, "total_tokens": 9.0, "lead_agent_tokens": 0.0} {
			if !sameJSON(row[k], v) {
				t.Errorf("run row %s = %v, want %v", k, row[k], v)
			}
		}
		if !sameJSON(row["kwargs"], map[string]any{"stream_mode": []string{"values"}}) || !sameJSON(row["metadata"], map[string]any{}) {
			t.Errorf("run row kwargs %v metadata %v", row["kwargs"], row["metadata"])
		}
		plain := c.run("t1", "r2", "success", nil)
		if plain["assistant_id"] != nil || plain["multitask_strategy"] != "reject" || !sameJSON(plain["kwargs"], map[string]any{}) || plain["message_count"] != 0.0 {
			t.Errorf("defaults = %v", plain)
		}
		// Newest first, as DeerFlow's run store lists them.
		list := c.want(200, "GET", "/api/threads/t1/runs", nil).([]any)
		if len(list) != 2 || !sameJSON(list[0], plain) || !sameJSON(list[1], row) {
			t.Errorf("runs list = %v, want r2 then r1", list)
		}
		c.detail(404, "GET", "/api/threads/t1/runs/nope", nil, "Run nope not found")
		// A thread without runs lists none; another user's answers alike.
		for _, who := range []*client{c, c.as("bob")} {
			if got := who.want(200, "GET", "/api/threads/t-new/runs", nil); !sameJSON(got, []any{}) {
				t.Errorf("runs of a new thread as %s = %v", who.user, got)
			}
		}
		if got := c.as("bob").want(200, "GET", "/api/threads/t1/runs", nil); !sameJSON(got, []any{}) {
			t.Errorf("bob lists alice's runs: %v", got)
		}
		if got := locs(c.want(422, "PUT", "/api/threads/t1/runs/r3", map[string]any{"status": "success", "multitask_strategy": "later"})); !sameJSON(got, [][]any{{"body", "multitask_strategy"}}) {
			t.Errorf("bad multitask_strategy: detail locs %v", got)
		}

		c.detail(409, "POST", "/api/threads/t1/runs/r1/cancel", nil, "Run r1 is not active on this worker and cannot be cancelled")
		c.detail(409, "POST", "/api/threads/t1/runs/r2/cancel?action=rollback&wait=true", nil, "Run r2 is not cancellable (status: success)")
		c.detail(409, "GET", "/api/threads/t1/runs/r1/join", nil, "Run r1 is not active on this worker and cannot be streamed")
		c.detail(409, "GET", "/api/threads/t1/runs/r2/stream", nil, "Run r2 is not active on this worker and cannot be streamed")
		c.detail(409, "POST", "/api/threads/t1/runs/r1/stream?action=interrupt", nil, "Run r1 is not active on this worker and cannot be cancelled")
		// A GET joins whatever its query says: it never cancels.
		c.detail(409, "GET", "/api/threads/t1/runs/r1/stream?action=interrupt", nil, "Run r1 is not active on this worker and cannot be streamed")
		for _, target := range []string{"/api/threads/t1/runs/nope/cancel", "/api/threads/t1/runs/nope/stream", "/api/threads/t9/runs/r1/join"} {
			method := "GET"
			if strings.HasSuffix(target, "cancel") {
				method = "POST"
			}
			run := strings.Split(target, "/")[5]
			c.detail(404, method, target, nil, "Run "+run+" not found")
		}
		c.as("bob").detail(404, "POST", "/api/threads/t1/runs/r1/cancel", nil, "Run r1 not found")
		if got := locs(c.want(422, "POST", "/api/threads/t1/runs/r1/cancel?action=stop", nil)); !sameJSON(got, [][]any{{"query", "action"}}) {
			t.Errorf("bad action: detail locs %v", got)
		}
		if got := locs(c.want(422, "GET", "/api/threads/t1/stream?run_id=a.b", nil)); !sameJSON(got, [][]any{{"query", "run_id"}}) {
			t.Errorf("bad run_id filter of the stream: detail locs %v", got)
		}
		// FastAPI's type: missing for an absent member, value_error for a
		// wrong value.
		for body, want := range map[string]string{`{}`: "missing", `{"status":"bogus"}`: "value_error"} {
			var raw map[string]any
			json.Unmarshal([]byte(body), &raw)
			detail, _ := c.want(422, "PUT", "/api/threads/t1/runs/r9", raw).(map[string]any)["detail"].([]any)
			if len(detail) != 1 || detail[0].(map[string]any)["type"] != want {
				t.Errorf("PUT a run row %s: detail %v, want type %s", body, detail, want)
			}
		}
	})
}

// Token usage (§2.7) with context_usage from the last lead AI message.
func TestTokenUsage(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *client) {
		empty := map[string]any{"thread_id": "t-new", "total_tokens": 0, "total_input_tokens": 0, "total_output_tokens": 0, "total_runs": 0,
			"by_model": map[string]any{}, "by_caller": map[string]any{"lead_agent": 0, "subagent": 0, "middleware": 0}, "context_usage": nil}
		if got := c.want(200, "GET", "/api/threads/t-new/token-usage", nil); !sameJSON(got, empty) {
			t.Errorf("empty thread token usage = %v", got)
		}
		c.run("t1", "r1", "success", map[string]any{"model_name": "gpt-4o", "total_input_tokens": 100, "total_output_tokens": 28, "total_tokens": 128, "lead_agent_tokens": 128})
		c.run("t1", "r2", "running", map[string]any{"model_name": "gpt-4o", "total_tokens": 50, "lead_agent_tokens": 50})
		c.post("t1", "r1", human("h1", "q"), ai("a1", "answer", "lead_agent", 1000, 280), ai("t1", "title", "middleware:title", 50, 5))
		want := map[string]any{"thread_id": "t1", "total_tokens": 128, "total_input_tokens": 100, "total_output_tokens": 28, "total_runs": 1,
			"by_model": map[string]any{"gpt-4o": map[string]any{"tokens": 128, "runs": 1}}, "by_caller": map[string]any{"lead_agent": 128, "subagent": 0, "middleware": 0},
			"context_usage": map[string]any{"token_count": 1280, "max_context_tokens": 128000, "percentage": 1.0}}
		if got := c.want(200, "GET", "/api/threads/t1/token-usage", nil); !sameJSON(got, want) {
			t.Errorf("token usage = %v\nwant %v", got, want)
		}
		if got := c.want(200, "GET", "/api/threads/t1/token-usage?include_active=true", nil).(map[string]any); got["total_runs"] != 2.0 || got["total_tokens"] != 178.0 {
			t.Errorf("include_active: %v", got)
		}
	})
}

// DeerFlow's history seeds span several runs: POST
// /api/threads/{thread_id}/events takes them in one batch, all or
// nothing.
func TestThreadBatchAcrossRuns(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *client) {
		withRun := func(run string, e event) event { e["run_id"] = run; return e }
		bad := withRun("seed-2", human("h2", "q"))
		bad["event_type"] = "llm.nope"
		resp := c.want(422, "POST", "/api/threads/t1/events", map[string]any{"events": []event{withRun("seed-1", human("h1", "q")), bad}})
		if got := locs(resp); !sameJSON(got, [][]any{{"body", "events", 1, "event_type"}}) {
			t.Errorf("bad event: detail locs %v", got)
		}
		if got := locs(c.want(422, "POST", "/api/threads/t1/events", map[string]any{"events": []event{human("h1", "q")}})); !sameJSON(got, [][]any{{"body", "events", 0, "run_id"}}) {
			t.Errorf("event without run_id: detail locs %v", got)
		}
		if got := c.want(200, "GET", "/api/threads/t1/messages/page", nil).(map[string]any)["data"]; !sameJSON(got, []any{}) {
			t.Fatalf("refused batches stored rows: %v", got)
		}
		body := c.want(201, "POST", "/api/threads/t1/events", map[string]any{"events": []event{
			withRun("seed-1", human("h1", "q1")), withRun("seed-1", ai("a1", "a1", "lead_agent", 1, 1)),
			withRun("seed-2", human("h2", "q2")), withRun("seed-2", ai("a2", "a2", "lead_agent", 1, 1)),
		}}).(map[string]any)
		var runs []string
		for _, rec := range body["events"].([]any) {
			runs = append(runs, rec.(map[string]any)["run_id"].(string))
		}
		if !slices.Equal(runs, []string{"seed-1", "seed-1", "seed-2", "seed-2"}) {
			t.Errorf("stored runs %v", runs)
		}
		for run, want := range map[string][]int{"seed-1": {1, 2}, "seed-2": {3, 4}} {
			if got := seqsOf(c.want(200, "GET", "/api/threads/t1/runs/"+run+"/messages", nil)); !slices.Equal(got, want) {
				t.Errorf("%s messages = %v, want %v (each row in its own run)", run, got, want)
			}
		}
		if got := locs(c.want(422, "POST", "/api/threads/t1/runs/r1/events", map[string]any{"events": []event{withRun("r1", human("h", "q"))}})); !sameJSON(got, [][]any{{"body", "events", 0, "run_id"}}) {
			t.Errorf("run_id on a run's route: detail locs %v", got)
		}
	})
}
