package langgraphsdk_test

import (
	"fmt"
)

// scriptChunk is one chunk the producer pushes.
type scriptChunk struct {
	Event string
	Data  any
}

// secretKey is a credential inside a tool call's arguments: the chunk
// redaction profile removes it and keeps the reasoning around it.
const secretKey = "sk-live-0123456789abcdefghijklmnop"

// reasoningText is the reasoning_content of the first model message.
const reasoningText = "The user wants a file written; I should delegate to a subagent."

// script returns the chunks of a DeerFlow run in ultra mode, shaped like
// its replay fixture (backend/tests/fixtures/replay/subagent_file_task
// .ultra.events.json): values states with DeerFlow's members, messages
// tuples ([AIMessageChunk, metadata]) carrying reasoning_content, updates,
// a subgraph's updates ("updates|ns"), and the custom task_started /
// task_running / task_completed events of a subagent. turns repeats the
// model turn to make the run as long as the test needs; the chunk at
// index secretIndex carries secretKey.
func script(threadID, runID string, turns int) (chunks []scriptChunk, secretIndex int) {
	human := map[string]any{"type": "human", "id": "human-1", "content": "Write hello.txt with a greeting, then read it back."}
	state := func(messages []any, title string) map[string]any {
		s := map[string]any{
			"messages":      messages,
			"artifacts":     []any{},
			"delegations":   []any{},
			"skill_context": map[string]any{"skills": []any{}},
			"viewed_images": map[string]any{},
			"thread_data": map[string]any{
				"workspace_path": "/mnt/user-data/workspace",
				"uploads_path":   "/mnt/user-data/uploads",
				"outputs_path":   "/mnt/user-data/outputs",
			},
			"uploaded_files": []any{},
		}
		if title != "" {
			s["title"] = title
		}
		return s
	}
	meta := func(node string, step int) map[string]any {
		return map[string]any{
			"thread_id": threadID, "run_id": runID, "assistant_id": "lead_agent",
			"langgraph_node": node, "langgraph_step": step, "langgraph_triggers": []any{"branch:to:" + node},
			"ls_provider": "openai", "ls_model_name": "scenario-model",
		}
	}
	add := func(event string, data any) { chunks = append(chunks, scriptChunk{event, data}) }

	messages := []any{human}
	add("values", state(messages, ""))
	for turn := range turns {
		aiID := fmt.Sprintf("run--ai-%d", turn)
		step := 2*turn + 1
		add("messages", []any{map[string]any{
			"type": "AIMessageChunk", "id": aiID, "content": "",
			"additional_kwargs": map[string]any{"reasoning_content": reasoningText},
			"tool_call_chunks":  []any{}, "response_metadata": map[string]any{},
		}, meta("model", step)})
		for i, piece := range []string{"I'll ", "ask a ", "subagent ", fmt.Sprintf("(turn %d).", turn)} {
			add("messages", []any{map[string]any{
				"type": "AIMessageChunk", "id": aiID, "content": piece,
				"additional_kwargs": map[string]any{}, "tool_call_chunks": []any{},
				"response_metadata": map[string]any{"chunk": i},
			}, meta("model", step)})
		}
		if turn == 0 {
			secretIndex = len(chunks)
			add("messages", []any{map[string]any{
				"type": "AIMessageChunk", "id": aiID, "content": "",
				"additional_kwargs": map[string]any{"reasoning_content": "Calling the task tool."},
				"tool_calls": []any{map[string]any{
					"name": "task", "id": "call-1", "type": "tool_call",
					"args": map[string]any{"description": "write hello.txt", "api_key": secretKey},
				}},
			}, meta("model", step)})
		}
		ai := map[string]any{"type": "ai", "id": aiID, "content": fmt.Sprintf("I'll ask a subagent (turn %d).", turn),
			"tool_calls": []any{map[string]any{"name": "task", "id": fmt.Sprintf("call-%d", turn), "args": map[string]any{"description": "write hello.txt"}}}}
		messages = append(messages, ai)
		add("updates", map[string]any{"model": map[string]any{"messages": []any{ai}}})
		add("values", state(messages, "Hello file"))
		taskID := fmt.Sprintf("task-%d", turn)
		add("custom", map[string]any{"type": "task_started", "task_id": taskID, "description": "write hello.txt", "model_name": "scenario-model"})
		for i := range 3 {
			add("custom", map[string]any{
				"type": "task_running", "task_id": taskID, "model_name": "scenario-model",
				"message":       map[string]any{"type": "ai", "content": fmt.Sprintf("step %d", i)},
				"message_index": i + 1, "total_messages": 3,
				"usage": map[string]any{"input_tokens": 100 + i, "output_tokens": 10 + i},
			})
		}
		add(fmt.Sprintf("updates|task:%s", taskID), map[string]any{"write_file": map[string]any{"path": "/mnt/user-data/outputs/hello.txt"}})
		add("custom", map[string]any{"type": "task_completed", "task_id": taskID, "model_name": "scenario-model",
			"result": "Wrote hello.txt", "usage": map[string]any{"input_tokens": 300, "output_tokens": 33}})
		tool := map[string]any{"type": "tool", "id": fmt.Sprintf("tool-%d", turn), "tool_call_id": fmt.Sprintf("call-%d", turn), "name": "task", "content": "Wrote hello.txt"}
		messages = append(messages, tool)
		add("values", state(messages, "Hello file"))
	}
	final := map[string]any{"type": "ai", "id": "run--ai-final", "content": "Done: hello.txt says hello."}
	add("messages", []any{map[string]any{"type": "AIMessageChunk", "id": "run--ai-final", "content": "Done: hello.txt says hello."}, meta("model", 2*turns+1)})
	messages = append(messages, final)
	add("values", state(messages, "Hello file"))
	return chunks, secretIndex
}
