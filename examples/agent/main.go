// Command agent is a Go agent that journals its run to a runstream server
// over HTTP: an Eino ReAct agent with file tools and a research subagent,
// editing the workspace and outputs of its thread. Its run events (human
// input, AI responses with usage, tool results, subagent steps, workspace
// changes, the delivery receipt) and its run row (status and token usage)
// read back through the thread endpoints.
//
// It runs offline with scripted models. With OPENAI_API_KEY set it uses an
// OpenAI-compatible model instead (OPENAI_BASE_URL, OPENAI_MODEL, default
// gpt-4o-mini):
//
//	runstream serve &
//	go run ./examples/agent -server http://127.0.0.1:8780 -dir /tmp/agent-demo
//
// See docs/PRODUCERS.md.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"time"

	"github.com/cloudwego/eino/components/model"
	"github.com/cloudwego/eino/components/tool"
	"github.com/cloudwego/eino/compose"
	"github.com/cloudwego/eino/flow/agent"
	"github.com/cloudwego/eino/flow/agent/react"
	"github.com/cloudwego/eino/schema"

	"github.com/runstream/runstream/journal"
	"github.com/runstream/runstream/journal/eino"
	"github.com/runstream/runstream/producer"
	"github.com/runstream/runstream/runevents"
	"github.com/runstream/runstream/subagent"
	"github.com/runstream/runstream/workspace"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Getenv); err != nil {
		fmt.Fprintln(os.Stderr, "agent:", err)
		os.Exit(1)
	}
}

// config is what a run needs.
type config struct {
	server, token    string
	thread, runID    string
	dir, question    string
	lead, researcher model.ToolCallingChatModel
	modelName        string
}

func parse(args []string, getenv func(string) string) (config, error) {
	fs := flag.NewFlagSet("agent", flag.ContinueOnError)
	c := config{}
	fs.StringVar(&c.server, "server", "http://127.0.0.1:8780", "the runstream server")
	fs.StringVar(&c.token, "token", getenv("RUNSTREAM_TOKEN"), "a bearer token for the server, if it requires one")
	fs.StringVar(&c.thread, "thread", "demo-thread", "the thread id")
	fs.StringVar(&c.runID, "run", fmt.Sprintf("run-%d", time.Now().UnixNano()), "the run id")
	fs.StringVar(&c.dir, "dir", filepath.Join(os.TempDir(), "runstream-agent"), "the thread's user data: workspace/ and outputs/")
	fs.StringVar(&c.question, "question", "Summarise workspace/notes.txt into outputs/report.md.", "the user's request")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if key := getenv("OPENAI_API_KEY"); key != "" {
		c.modelName = getenv("OPENAI_MODEL")
		if c.modelName == "" {
			c.modelName = "gpt-4o-mini"
		}
		m := newOpenAI(getenv("OPENAI_BASE_URL"), key, c.modelName)
		c.lead, c.researcher = m, m
	} else {
		c.modelName = "scripted"
		c.lead, c.researcher = leadScript(), researchScript()
	}
	return c, nil
}

// run is the whole program: one agent run journaled to the server.
func run(ctx context.Context, args []string, stdout io.Writer, getenv func(string) string) error {
	c, err := parse(args, getenv)
	if err != nil {
		return err
	}
	f := files{dir: c.dir}
	notes := filepath.Join(c.dir, "workspace", "notes.txt")
	if _, err := os.Stat(notes); err != nil {
		if err := os.MkdirAll(filepath.Dir(notes), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(notes, []byte("plan\nbuild\nship\n"), 0o644); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(filepath.Join(c.dir, "outputs"), 0o755); err != nil {
		return err
	}

	pc := producer.Config{URL: c.server}
	if c.token != "" {
		pc.Header = http.Header{"Authorization": {"Bearer " + c.token}}
	}
	w, err := producer.New(pc)
	if err != nil {
		return err
	}
	row := runevents.ThreadRun{ThreadID: c.thread, RunID: c.runID, Status: runevents.RunRunning, ModelName: c.modelName}
	if err := w.PutRun(ctx, row); err != nil {
		return fmt.Errorf("create the run row: %w", err)
	}
	j, err := journal.New(w, journal.Options{ThreadID: c.thread, RunID: c.runID, Progress: journal.RunRowProgress(w, row)})
	if err != nil {
		return err
	}
	steps := subagent.NewWriter(w, c.thread, c.runID, nil)
	ws := workspace.Config{Roots: workspace.DefaultRoots(filepath.Join(c.dir, "workspace"), filepath.Join(c.dir, "outputs"))}
	before, err := workspace.Capture(ctx, ws)
	if err != nil {
		return err
	}

	answer, runErr := ask(ctx, c, f, j, steps)
	status := runevents.RunSuccess
	if runErr != nil || j.Summary().ErrorFallback != "" {
		// A model that answered with DeerFlow's error fallback failed the
		// run, as DeerFlow's worker decides.
		status = runevents.RunError
	}

	// The reference's cleanup order: subagent steps, workspace changes,
	// the journal, the delivery receipt, the run row, then the writer.
	if err := steps.Flush(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "agent: subagent steps:", err)
	}
	changes, _, err := workspace.Record(ctx, w, c.thread, c.runID, ws, before)
	if err != nil {
		fmt.Fprintln(os.Stderr, "agent: workspace changes:", err)
	}
	if err := j.Flush(ctx); err != nil {
		return fmt.Errorf("flush the journal: %w", err)
	}
	if _, err := j.RecordDelivery(ctx, j.Delivery()); err != nil {
		fmt.Fprintln(os.Stderr, "agent: delivery receipt:", err)
	}
	if err := j.Complete(ctx, row, status); err != nil {
		return err
	}
	closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if err := w.Close(closeCtx); err != nil {
		return err
	}
	if runErr != nil {
		return runErr
	}
	s := j.Summary()
	fmt.Fprintf(stdout, "thread %s run %s: %s\n", c.thread, c.runID, answer)
	fmt.Fprintf(stdout, "workspace: %s; tokens: %d in %d calls\n", changes.Summary, s.TotalTokens, s.LLMCallCount)
	return nil
}

// ask runs the lead agent on the question.
func ask(ctx context.Context, c config, f files, j *journal.Journal, steps *subagent.Writer) (string, error) {
	read, write := readFile{f}, writeFile{f}
	tools := []tool.BaseTool{read, write, task{model: c.researcher, tools: []tool.InvokableTool{read}, steps: steps, journal: j}}
	a, err := react.NewAgent(ctx, &react.AgentConfig{ToolCallingModel: c.lead, ToolsConfig: compose.ToolsNodeConfig{Tools: tools}, MaxStep: 20})
	if err != nil {
		return "", err
	}
	h := eino.New(j, eino.Options{ModelName: c.modelName})
	msg, err := a.Generate(ctx, []*schema.Message{
		schema.SystemMessage("You are a helpful agent. Files live under workspace/ and outputs/. Use the task tool to research, write_file to write."),
		schema.UserMessage(c.question),
	}, agent.WithComposeOptions(compose.WithCallbacks(h)))
	if err != nil {
		return "", err
	}
	return msg.Content, nil
}
