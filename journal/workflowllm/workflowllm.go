// Package workflowllm records the work of workflow llm nodes in the run
// event stream: each attempt of a node becomes a run of a thread, the thread
// being the workflow run (thread id = workflow run id, run id = node run
// id), so the thread endpoints show what a workflow's model calls did.
//
// Register the llm node type with engine.ObservedLLM(Observer(…), …). When
// an attempt ends, its output ({"text", "toolCalls"}) is journaled:
//
//	run.start        {chain: node id}, metadata {caller, workflow_id, node_id, attempt}
//	llm.ai.response  the tool calls the model requested (when it made any)
//	llm.tool.result  one per call, its output or error
//	llm.ai.response  the text the model answered
//	run.end | run.error
//
// and the node run's row is written with status success or error and
// operation_kind "workflow_llm" (so the thread's token usage, which counts
// agent runs, leaves it out). The engine reports neither the prompt nor the
// token usage of a provider's calls, so there is no llm.human.input and no
// usage. A failure to journal is logged, never the node's.
package workflowllm

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/engine"
	"github.com/runstream/runstream/journal"
	"github.com/runstream/runstream/runevents"
	"github.com/runstream/runstream/threadsvc"
	"github.com/runstream/runstream/workflow"
)

// Config is where an Observer writes.
type Config struct {
	// Threads is the thread service the events and rows go through.
	Threads *threadsvc.Service
	// Runs finds the workflow run's owner, who owns the rows.
	Runs workflow.Store
	// Timeout bounds the writes of one attempt. Defaults to 10s.
	Timeout time.Duration
	// Logger receives failures. Defaults to slog.Default().
	Logger *slog.Logger
}

type toolCall struct {
	ID     string          `json:"id"`
	Name   string          `json:"name"`
	Status string          `json:"status"`
	Output json.RawMessage `json:"output"`
	Error  string          `json:"error"`
}

// Observer returns the observer of engine.ObservedLLM that journals each
// attempt through cfg.Threads as the workflow run's owner.
func Observer(cfg Config) func(ctx context.Context, n *engine.NodeRun, a engine.LLMAttempt) {
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return func(ctx context.Context, n *engine.NodeRun, a engine.LLMAttempt) {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.Timeout)
		defer cancel()
		if err := record(ctx, cfg, n, a); err != nil {
			cfg.Logger.Warn("workflowllm: attempt not journaled", "run_id", n.RunID, "node_id", n.NodeID,
				"node_run_id", n.NodeRunID, "attempt", n.Attempt, "err", err)
		}
	}
}

func record(ctx context.Context, cfg Config, n *engine.NodeRun, a engine.LLMAttempt) error {
	run, err := cfg.Runs.GetRun(ctx, n.RunID, runstream.AnyOwner)
	if err != nil {
		return err
	}
	sink := journal.ServiceSink{Service: cfg.Threads, User: run.OwnerID}
	j, err := journal.New(sink, journal.Options{ThreadID: n.RunID, RunID: n.NodeRunID, FlushThreshold: 100})
	if err != nil {
		return err
	}
	j.ChainStart(ctx, journal.ChainStart{Name: n.NodeID, Metadata: map[string]any{
		"workflow_id": n.WorkflowID, "node_id": n.NodeID, "attempt": n.Attempt}})
	status := runevents.RunSuccess
	if a.Err != nil {
		status = runevents.RunError
		j.ChainError(ctx, journal.ChainError{Err: a.Err, ErrorType: errorType(a.Err)})
	} else {
		var out struct {
			Text      string     `json:"text"`
			ToolCalls []toolCall `json:"toolCalls"`
		}
		if err := json.Unmarshal(a.Output, &out); err != nil {
			return fmt.Errorf("llm output: %w", err)
		}
		prefix := fmt.Sprintf("%s-%d", n.NodeRunID, n.Attempt)
		if len(out.ToolCalls) > 0 {
			requested := &journal.Message{Type: "ai", Content: journal.TextContent("")}
			for _, c := range out.ToolCalls {
				requested.ToolCalls = append(requested.ToolCalls, journal.ToolCall{ID: c.ID, Name: c.Name, Type: "tool_call"})
			}
			j.LLMEnd(ctx, journal.LLMEnd{CallID: prefix + "-tools", Generations: []*journal.Message{requested}})
			for _, c := range out.ToolCalls {
				content := string(c.Output)
				if c.Status != "ok" {
					content = c.Error
				}
				m := journal.Message{Type: "tool", ToolCallID: c.ID, Name: c.Name, Status: c.Status, Content: journal.TextContent(content)}
				j.ToolEnd(ctx, journal.ToolEnd{Message: &m})
			}
		}
		j.LLMEnd(ctx, journal.LLMEnd{CallID: prefix + "-answer", Generations: []*journal.Message{{Type: "ai", Content: journal.TextContent(out.Text)}}})
		j.ChainEnd(ctx, journal.ChainEnd{Outputs: json.RawMessage(a.Output)})
	}
	if err := j.Flush(ctx); err != nil {
		return err
	}
	meta, err := json.Marshal(map[string]any{"workflow_id": n.WorkflowID, "node_id": n.NodeID, "attempt": n.Attempt})
	if err != nil {
		return err
	}
	row := runevents.ThreadRun{ThreadID: n.RunID, RunID: n.NodeRunID, OperationKind: "workflow_llm", Metadata: meta}
	return j.Complete(ctx, row, status)
}

func errorType(err error) string {
	if e, ok := err.(*runstream.Error); ok {
		return string(e.Code)
	}
	return fmt.Sprintf("%T", err)
}
