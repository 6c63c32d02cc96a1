package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/cloudwego/eino/components/model"
	"github.com/cloudwego/eino/components/tool"
	"github.com/cloudwego/eino/compose"
	"github.com/cloudwego/eino/schema"

	"github.com/runstream/runstream/journal"
	"github.com/runstream/runstream/subagent"
)

// files is the thread's user data: workspace/ and outputs/ under dir.
type files struct{ dir string }

// resolve maps "workspace/…" or "outputs/…" to a file under dir.
func (f files) resolve(p string) (string, error) {
	clean := filepath.Clean(filepath.FromSlash(p))
	if !strings.HasPrefix(clean, "workspace"+string(filepath.Separator)) && !strings.HasPrefix(clean, "outputs"+string(filepath.Separator)) {
		return "", fmt.Errorf("path %q is not under workspace/ or outputs/", p)
	}
	return filepath.Join(f.dir, clean), nil
}

type readFile struct{ files }

func (readFile) Info(context.Context) (*schema.ToolInfo, error) {
	return &schema.ToolInfo{Name: "read_file", Desc: "Read a file of workspace/ or outputs/.",
		ParamsOneOf: schema.NewParamsOneOfByParams(map[string]*schema.ParameterInfo{
			"path": {Type: schema.String, Desc: "workspace/… or outputs/…", Required: true}})}, nil
}

func (t readFile) InvokableRun(ctx context.Context, args string, _ ...tool.Option) (string, error) {
	var in struct{ Path string }
	if err := json.Unmarshal([]byte(args), &in); err != nil {
		return "", err
	}
	p, err := t.resolve(in.Path)
	if err != nil {
		return err.Error(), nil
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return err.Error(), nil
	}
	return string(b), nil
}

type writeFile struct{ files }

func (writeFile) Info(context.Context) (*schema.ToolInfo, error) {
	return &schema.ToolInfo{Name: "write_file", Desc: "Write a file of workspace/ or outputs/.",
		ParamsOneOf: schema.NewParamsOneOfByParams(map[string]*schema.ParameterInfo{
			"path":    {Type: schema.String, Desc: "workspace/… or outputs/…", Required: true},
			"content": {Type: schema.String, Desc: "the whole new content", Required: true}})}, nil
}

func (t writeFile) InvokableRun(ctx context.Context, args string, _ ...tool.Option) (string, error) {
	var in struct{ Path, Content string }
	if err := json.Unmarshal([]byte(args), &in); err != nil {
		return "", err
	}
	p, err := t.resolve(in.Path)
	if err != nil {
		return err.Error(), nil
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return "", err
	}
	if err := os.WriteFile(p, []byte(in.Content), 0o644); err != nil {
		return "", err
	}
	return fmt.Sprintf("wrote %d bytes to %s", len(in.Content), in.Path), nil
}

// task runs a research subagent: a small tool loop of its own whose steps
// become subagent.* events (through the writer) and whose token usage is
// added to the run's as external usage.
type task struct {
	model   model.ToolCallingChatModel
	tools   []tool.InvokableTool
	steps   *subagent.Writer
	journal *journal.Journal
}

func (task) Info(context.Context) (*schema.ToolInfo, error) {
	return &schema.ToolInfo{Name: "task", Desc: "Delegate a research task to a subagent that can read files.",
		ParamsOneOf: schema.NewParamsOneOfByParams(map[string]*schema.ParameterInfo{
			"description": {Type: schema.String, Desc: "a short title", Required: true},
			"prompt":      {Type: schema.String, Desc: "what to do", Required: true}})}, nil
}

func (t task) chunk(ctx context.Context, v map[string]any) {
	raw, _ := json.Marshal(v)
	if err := t.steps.Add(ctx, raw); err != nil {
		// a chunk this program built is never malformed; report it if it is
		fmt.Fprintln(os.Stderr, "subagent chunk:", err)
	}
}

func (t task) InvokableRun(ctx context.Context, args string, _ ...tool.Option) (string, error) {
	var in struct{ Description, Prompt string }
	if err := json.Unmarshal([]byte(args), &in); err != nil {
		return "", err
	}
	id := compose.GetToolCallID(ctx)
	t.chunk(ctx, map[string]any{"type": "task_started", "task_id": id, "description": in.Description})
	byName := map[string]tool.InvokableTool{}
	var infos []*schema.ToolInfo
	for _, tl := range t.tools {
		info, err := tl.Info(ctx)
		if err != nil {
			return "", err
		}
		byName[info.Name] = tl
		infos = append(infos, info)
	}
	m, err := t.model.WithTools(infos)
	if err != nil {
		return "", err
	}
	messages := []*schema.Message{schema.SystemMessage("You are a careful researcher."), schema.UserMessage(in.Prompt)}
	var usage schema.TokenUsage
	index := 0
	for round := 0; round < 8; round++ {
		reply, err := m.Generate(ctx, messages)
		if err != nil {
			t.chunk(ctx, map[string]any{"type": "task_failed", "task_id": id, "error": err.Error()})
			return "the subagent failed: " + err.Error(), nil
		}
		if reply.ResponseMeta != nil && reply.ResponseMeta.Usage != nil {
			u := reply.ResponseMeta.Usage
			usage.PromptTokens += u.PromptTokens
			usage.CompletionTokens += u.CompletionTokens
			usage.TotalTokens += u.TotalTokens
			t.journal.RecordExternalUsage([]journal.ExternalUsage{{SourceRunID: fmt.Sprintf("%s-%d", id, round),
				Caller: "subagent:research", ModelName: "research", InputTokens: int64(u.PromptTokens),
				OutputTokens: int64(u.CompletionTokens), TotalTokens: int64(u.TotalTokens)}})
		}
		messages = append(messages, reply)
		index++
		t.chunk(ctx, map[string]any{"type": "task_running", "task_id": id, "message_index": index, "message": stepMessage(reply)})
		if len(reply.ToolCalls) == 0 {
			t.chunk(ctx, map[string]any{"type": "task_completed", "task_id": id, "result": reply.Content,
				"usage": map[string]int{"input_tokens": usage.PromptTokens, "output_tokens": usage.CompletionTokens, "total_tokens": usage.TotalTokens}})
			return reply.Content, nil
		}
		for _, tc := range reply.ToolCalls {
			out := "unknown tool " + tc.Function.Name
			if tl, ok := byName[tc.Function.Name]; ok {
				if out, err = tl.InvokableRun(ctx, tc.Function.Arguments); err != nil {
					out = err.Error()
				}
			}
			result := schema.ToolMessage(out, tc.ID, schema.WithToolName(tc.Function.Name))
			messages = append(messages, result)
			index++
			t.chunk(ctx, map[string]any{"type": "task_running", "task_id": id, "message_index": index, "message": stepMessage(result)})
		}
	}
	t.chunk(ctx, map[string]any{"type": "task_timed_out", "task_id": id, "error": "too many rounds"})
	return "the subagent ran out of rounds", nil
}

// stepMessage is the dump of a subagent message in a task_running chunk.
func stepMessage(m *schema.Message) map[string]any {
	if m.Role == schema.Tool {
		return map[string]any{"type": "tool", "name": m.ToolName, "content": m.Content, "tool_call_id": m.ToolCallID}
	}
	calls := []map[string]any{}
	for _, tc := range m.ToolCalls {
		var args any = tc.Function.Arguments
		var v any
		if json.Unmarshal([]byte(tc.Function.Arguments), &v) == nil {
			args = v
		}
		calls = append(calls, map[string]any{"id": tc.ID, "name": tc.Function.Name, "args": args})
	}
	return map[string]any{"type": "ai", "content": m.Content, "tool_calls": calls}
}
