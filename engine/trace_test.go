package engine_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/engine"
	"github.com/runstream/runstream/engine/enginetest"
	"github.com/runstream/runstream/tracing"
	"github.com/runstream/runstream/workflow"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// boom is a node type that fails with an error that is not a
// *runstream.Error, which the engine logs.
var boom = engine.NodeType{Name: "boom", Compile: func(json.RawMessage) (engine.NodeFunc, error) {
	return func(context.Context, *engine.NodeRun) (json.RawMessage, error) { return nil, errors.New("boom") }, nil
}}

// recordSpans installs a global SDK provider whose spans the test reads,
// until the test ends.
func recordSpans(t *testing.T) (*tracetest.SpanRecorder, *sdktrace.TracerProvider) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	prev := otel.GetTracerProvider()
	otel.SetTracerProvider(tp)
	t.Cleanup(func() { otel.SetTracerProvider(prev) })
	return rec, tp
}

// spansOf returns the ended spans whose runstream.run.id is runID.
func spansOf(rec *tracetest.SpanRecorder, runID string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		for _, kv := range s.Attributes() {
			if kv.Key == "runstream.run.id" && kv.Value.AsString() == runID {
				out = append(out, s)
			}
		}
	}
	return out
}

func spanAttrs(s sdktrace.ReadOnlySpan) map[attribute.Key]attribute.Value {
	out := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes() {
		out[kv.Key] = kv.Value
	}
	return out
}

// A run's execution is a span, the child of the span that queued it
// (NotifyContext), and each node attempt a child span of it with its type,
// attempt, status, error code and retry, and an llm node's tokens. A run
// queued by no traced work of this engine is the root of its own trace.
// The engine's log lines about an attempt name its trace and span.
// Not parallel: it installs the global tracer provider.
func TestRunTrace(t *testing.T) {
	rec, tp := recordSpans(t)

	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t)
		run := e.createRun(t, `{"name":"retry","nodes":[
			{"id":"draft","type":"llm","retry":{"maxAttempts":3,"backoffMs":1000},
			 "config":{"provider":"scripted","text":"one two three","failAttempts":[1],"failAfterTokens":2}},
			{"id":"shout","type":"transform","needs":["draft"],"config":{"expression":"upper(nodes.draft.output.text)"}}],
			"output":"shout"}`, `{}`)
		untraced := e.createRun(t, `{"name":"plain","nodes":[{"id":"only","type":"boom","config":{}}]}`, `{}`)
		reg, err := engine.NewRegistry(append(engine.Builtins(), boom)...)
		if err != nil {
			t.Fatal(err)
		}
		var logs bytes.Buffer // written under the JSON handler's lock
		logger := slog.New(tracing.LogHandler(slog.NewJSONHandler(&logs, nil)))
		eng, err := engine.New(engine.Config{Store: e.store, Log: e.log, Registry: reg, Logger: logger, PollInterval: 20 * time.Millisecond, LeaseDuration: 3 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		reqCtx, req := tp.Tracer("test").Start(context.Background(), "POST /runs")
		eng.NotifyContext(reqCtx, run.ID)
		req.End()
		if err := eng.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		defer eng.Stop(context.Background())
		e.waitTerminal(t, run.ID)
		e.waitTerminal(t, untraced.ID)
		eng.Stop(context.Background())

		spans := spansOf(rec, run.ID)
		var runSpan sdktrace.ReadOnlySpan
		for _, s := range spans {
			if s.Name() == "workflow.run" {
				runSpan = s
			}
		}
		if runSpan == nil {
			t.Fatalf("no workflow.run span among %d", len(spans))
		}
		a := spanAttrs(runSpan)
		if runSpan.Parent().SpanID() != req.SpanContext().SpanID() || runSpan.SpanContext().TraceID() != req.SpanContext().TraceID() ||
			a["runstream.run.status"].AsString() != "completed" || a["runstream.run.outcome"].AsString() != "ended" ||
			a["runstream.workflow.id"].AsString() != run.WorkflowID || runSpan.SpanKind() != trace.SpanKindConsumer {
			t.Errorf("run span: parent %v, attributes %v; want the request's child, completed", runSpan.Parent(), a)
		}
		type attempt struct {
			name, status, code string
			attempt            int64
			retry              bool
			tokens             int64
			failed             bool
		}
		var got []attempt
		for _, s := range spans {
			if s == runSpan {
				continue
			}
			if s.Parent().SpanID() != runSpan.SpanContext().SpanID() {
				t.Errorf("span %q is not the run span's child", s.Name())
			}
			a := spanAttrs(s)
			got = append(got, attempt{s.Name(), a["runstream.node.status"].AsString(), a["runstream.error.code"].AsString(),
				a["runstream.node.attempt"].AsInt64(), a["runstream.node.will_retry"].AsBool(), a["gen_ai.usage.output_tokens"].AsInt64(),
				s.Status().Code == codes.Error})
		}
		want := []attempt{
			{"workflow.node llm", "failed", string(runstream.CodeWorkflowLLMProviderError), 1, true, 2, true},
			{"workflow.node llm", "completed", "", 2, false, 3, false},
			{"workflow.node transform", "completed", "", 1, false, 0, false},
		}
		if len(got) != len(want) {
			t.Fatalf("attempt spans %+v, want %+v", got, want)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("attempt span %d = %+v, want %+v", i, got[i], want[i])
			}
		}

		// The run no traced work queued is the root of a trace of its own;
		// the log line of its node's failure names the attempt's span.
		var boomSpan sdktrace.ReadOnlySpan
		for _, s := range spansOf(rec, untraced.ID) {
			switch s.Name() {
			case "workflow.run":
				if s.Parent().IsValid() || s.SpanContext().TraceID() == req.SpanContext().TraceID() {
					t.Errorf("the untraced run's span has parent %v, want the root of a trace of its own", s.Parent())
				}
			case "workflow.node boom":
				boomSpan = s
			}
		}
		if boomSpan == nil {
			t.Fatal("no span of the boom node")
		}
		var logged bool
		for line := range strings.Lines(logs.String()) {
			var l map[string]any
			if json.Unmarshal([]byte(line), &l) == nil && l["msg"] == "node failed" &&
				l["trace_id"] == boomSpan.SpanContext().TraceID().String() && l["span_id"] == boomSpan.SpanContext().SpanID().String() {
				logged = true
			}
		}
		if !logged {
			t.Errorf("no \"node failed\" line naming the attempt's trace and span:\n%s", logs.String())
		}
	})
}

// A run parked awaiting input and resumed is two executions: the first
// yields, the second is the child of the request that resumed the run and
// links to the first. Not parallel: it installs the global tracer
// provider.
func TestResumedRunLinksItsExecutions(t *testing.T) {
	rec, tp := recordSpans(t)
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t)
		eng := e.start(t, nil)
		run := e.createRun(t, `{"name":"approve","nodes":[
			{"id":"ask","type":"human_input","config":{"actions":["approve"]}},
			{"id":"decide","type":"transform","needs":["ask"],"config":{"expression":"nodes.ask.output.action"}}],
			"output":"decide"}`, `{}`)
		_, events := e.wait(t, run.ID, "awaiting input", func(r workflow.Run, _ []workflow.Envelope) bool { return r.Status == workflow.StatusAwaitingInput })
		var awaiting struct{ ResumeToken string }
		env := enginetest.Data(t, events, workflow.EventRunAwaitingInput, "ask", 0, &awaiting)
		synctest.Wait() // the first execution ended
		hash := sha256.Sum256([]byte(awaiting.ResumeToken))
		if _, err := e.log.Resume(t.Context(), workflow.ResumeParams{
			RunID: run.ID, Owner: runstream.AnyOwner, Hash: hash[:], Now: time.Now(),
			Events:      []workflow.NewEvent{{Event: workflow.EventRunResumed, NodeID: "ask", NodeRunID: env.NodeRunID, Data: engine.ResumedData("approve")}},
			NodeOutputs: map[string]json.RawMessage{"ask": engine.ResumeOutput("approve", json.RawMessage(`{}`))},
		}); err != nil {
			t.Fatal(err)
		}
		resumeCtx, resume := tp.Tracer("test").Start(context.Background(), "POST /resume")
		eng.NotifyContext(resumeCtx, run.ID)
		resume.End()
		e.waitTerminal(t, run.ID)
		eng.Stop(context.Background())

		var execs []sdktrace.ReadOnlySpan
		for _, s := range spansOf(rec, run.ID) {
			if s.Name() == "workflow.run" {
				execs = append(execs, s)
			}
		}
		if len(execs) != 2 {
			t.Fatalf("%d executions, want 2", len(execs))
		}
		first, second := execs[0], execs[1]
		if spanAttrs(first)["runstream.run.outcome"].AsString() != "yielded" || first.Parent().IsValid() {
			t.Errorf("first execution: parent %v, attributes %v; want a root that yielded", first.Parent(), spanAttrs(first))
		}
		if second.Parent().SpanID() != resume.SpanContext().SpanID() || spanAttrs(second)["runstream.run.status"].AsString() != "completed" {
			t.Errorf("second execution: parent %v, attributes %v; want the resume's child, completed", second.Parent(), spanAttrs(second))
		}
		if links := second.Links(); len(links) != 1 || links[0].SpanContext.SpanID() != first.SpanContext().SpanID() {
			t.Errorf("second execution links %v, want the first execution", links)
		}
	})
}
