package deerflowcompat

import "fmt"

// Rows as DeerFlow's journal writes them (reference §1.2), for the POST
// bodies of the ingest.

type event = map[string]any

func human(id, text string) event {
	return event{"event_type": "llm.human.input", "content": map[string]any{"type": "human", "content": text, "id": id},
		"metadata": map[string]any{"caller": "lead_agent"}}
}

// ai is an AI message of caller with usage (in+out tokens).
func ai(id, text, caller string, in, out int) event {
	return event{"event_type": "llm.ai.response",
		"content":  map[string]any{"type": "ai", "content": text, "tool_calls": []any{}, "id": id},
		"metadata": map[string]any{"caller": caller, "usage": map[string]any{"input_tokens": in, "output_tokens": out, "total_tokens": in + out}, "latency_ms": 10, "llm_call_index": 1}}
}

func tool(callID, text string, extra map[string]any) event {
	content := map[string]any{"type": "tool", "content": text, "tool_call_id": callID, "name": "task"}
	for k, v := range extra {
		content[k] = v
	}
	return event{"event_type": "llm.tool.result", "content": content, "metadata": map[string]any{}}
}

func middleware(tag string) event {
	return event{"event_type": "middleware:" + tag, "content": map[string]any{"name": "TitleMiddleware", "hook": "after_agent", "action": "set", "changes": map[string]any{}},
		"metadata": map[string]any{}}
}

func step(task string, index int) event {
	return event{"event_type": "subagent.step",
		"content":  map[string]any{"task_id": task, "message_index": index, "kind": "ai", "text": fmt.Sprintf("step %d", index), "truncated": false, "tool_calls": []any{}},
		"metadata": map[string]any{"task_id": task, "message_index": index}}
}

// post appends events to a run of the thread and returns their seqs.
func (c *client) post(thread, run string, events ...event) []int {
	c.t.Helper()
	body := c.want(201, "POST", "/api/threads/"+thread+"/runs/"+run+"/events", map[string]any{"events": events}).(map[string]any)
	var seqs []int
	for _, rec := range body["events"].([]any) {
		seqs = append(seqs, int(rec.(map[string]any)["seq"].(float64)))
	}
	return seqs
}

// run stores a run row with status and extra members.
func (c *client) run(thread, run, status string, extra map[string]any) map[string]any {
	c.t.Helper()
	body := map[string]any{"status": status}
	for k, v := range extra {
		body[k] = v
	}
	return c.want(200, "PUT", "/api/threads/"+thread+"/runs/"+run, body).(map[string]any)
}

// seqsOf returns the seq of each row of a list (a page's data or a bare
// array).
func seqsOf(rows any) []int {
	if m, ok := rows.(map[string]any); ok {
		rows = m["data"]
	}
	var out []int
	for _, r := range rows.([]any) {
		out = append(out, int(r.(map[string]any)["seq"].(float64)))
	}
	return out
}

func seqRange(from, to int) []int {
	var out []int
	for i := from; i <= to; i++ {
		out = append(out, i)
	}
	return out
}
