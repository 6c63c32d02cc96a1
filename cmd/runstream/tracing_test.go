package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/runstream/runstream/internal/otlptest"
	"github.com/runstream/runstream/workflow"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace/noop"
)

// Traced requests: a caller's traceparent, and the traceparents the
// servers of the test received.
const (
	callerTraceID     = "4bf92f3577b34da6a3ce929d0e0e4736"
	callerSpanID      = "00f067aa0ba902b7"
	callerTraceparent = "00-" + callerTraceID + "-" + callerSpanID + "-01"
)

// traceparents records the traceparent header of each request a test
// server receives.
type traceparents struct {
	mu   sync.Mutex
	seen []string
	// usage is set when an llm request asked for its token usage.
	usage bool
}

func (tp *traceparents) record(r *http.Request) {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	tp.seen = append(tp.seen, r.Header.Get("traceparent"))
}

func (tp *traceparents) askedUsage() bool {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	return tp.usage
}

func (tp *traceparents) all() []string {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	return append([]string(nil), tp.seen...)
}

// tracedServers starts the servers a traced workflow calls: a plain HTTP
// service and an OpenAI-compatible one that streams "hi" and, as OpenAI
// does when the request asks for it (stream_options.include_usage),
// reports 7 prompt and 3 completion tokens.
func tracedServers(t *testing.T) (remote, llm *httptest.Server, remoteSeen, llmSeen *traceparents) {
	remoteSeen, llmSeen = &traceparents{}, &traceparents{}
	remote = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		remoteSeen.record(r)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"ok":true}`)
	}))
	t.Cleanup(remote.Close)
	llm = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		llmSeen.record(r)
		var body struct {
			StreamOptions struct {
				IncludeUsage bool `json:"include_usage"`
			} `json:"stream_options"`
		}
		json.NewDecoder(r.Body).Decode(&body)
		llmSeen.mu.Lock()
		llmSeen.usage = llmSeen.usage || body.StreamOptions.IncludeUsage
		llmSeen.mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":"stop"}]}`+"\n\n")
		if body.StreamOptions.IncludeUsage {
			io.WriteString(w, `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":7,"completion_tokens":3,"total_tokens":10}}`+"\n\n")
		}
		io.WriteString(w, "data: [DONE]\n\n")
	}))
	t.Cleanup(llm.Close)
	return remote, llm, remoteSeen, llmSeen
}

// tracedRun publishes a workflow of an http node calling remote and an
// llm node asking llm, starts it with the caller's traceparent, follows
// it to its end, then reads its stream again from seq 2 (a resume). It
// returns the run id.
func tracedRun(t *testing.T, base string, remote, llm *httptest.Server) string {
	t.Helper()
	code, wf := postJSON(t, base+"/api/workflows", `{"name":"traced","nodes":[
		{"id":"fetch","type":"http","config":{"url":"`+remote.URL+`/status"}},
		{"id":"ask","type":"llm","needs":["fetch"],"config":{"provider":"openai","baseURL":"`+llm.URL+`/v1","model":"m","prompt":"hello"}}],
		"output":"ask"}`)
	if code != http.StatusCreated {
		t.Fatalf("publish: %d %v", code, wf)
	}
	req, _ := http.NewRequest(http.MethodPost, base+"/api/workflows/"+wf["workflowId"].(string)+"/runs", strings.NewReader(`{"input":{}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("traceparent", callerTraceparent)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var run struct{ RunID string }
	json.NewDecoder(resp.Body).Decode(&run)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated || run.RunID == "" {
		t.Fatalf("start run: %d", resp.StatusCode)
	}
	events := followRun(t, base, run.RunID)
	if len(events) == 0 || events[len(events)-1].Event != workflow.EventRunCompleted {
		t.Fatalf("the run did not complete: %v", eventTypes(events))
	}
	req, _ = http.NewRequest(http.MethodGet, base+"/api/workflows/runs/"+run.RunID+"/stream", nil)
	req.Header.Set("Last-Event-ID", "2")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body) // the stream ends after the terminal event
	resp.Body.Close()
	return run.RunID
}

// With the OTEL_* variables an operator sets, serve exports the trace of
// a workflow run over OTLP/HTTP: the caller's trace holds the server span
// of the request that started the run (named by its route), the run's
// span as its child, a span per node attempt as the run span's children
// (node type, attempt, status; the llm node's tokens), and the client
// spans of the http node and of the llm call, whose traceparent the
// called servers received. A resumed stream is one span with a
// stream.resume event. Span names hold no id, and the log lines of the
// traced requests name their trace. Not parallel: it sets the process
// environment and the global tracer provider.
func TestServeExportsTheTraceOfARun(t *testing.T) {
	collector := otlptest.Start(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.URL)
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
	t.Setenv("OTEL_SERVICE_NAME", "runstream-under-test")
	t.Setenv("OTEL_TRACES_SAMPLER", "parentbased_always_on")
	remote, llm, remoteSeen, llmSeen := tracedServers(t)
	p := runServe(t, nil, "--store", "memory:", "--workers", "1", "--http-node-allow", "127.0.0.0/8")
	runID := tracedRun(t, p.base, remote, llm)
	// Shutting down flushes the spans.
	if err := p.stop(); err != nil {
		t.Fatalf("serve: %v", err)
	}
	spans := collector.Spans()
	if len(spans) == 0 {
		t.Fatalf("no span exported\nstderr:\n%s", p.stderr)
	}
	byID := map[string]otlptest.Span{}
	for _, s := range spans {
		byID[s.SpanID] = s
		if strings.Contains(s.Name, runID) || strings.Contains(s.Name, "wf_") {
			t.Errorf("span name %q holds an id", s.Name)
		}
		if s.Service != "runstream-under-test" {
			t.Errorf("span %q of service %q, want OTEL_SERVICE_NAME's", s.Name, s.Service)
		}
	}
	find := func(name string) []otlptest.Span {
		var out []otlptest.Span
		for _, s := range spans {
			if s.Name == name {
				out = append(out, s)
			}
		}
		return out
	}

	// The request that started the run: a server span in the caller's
	// trace, named by its route.
	starts := find("POST /api/workflows/{workflow_id}/runs")
	if len(starts) != 1 {
		t.Fatalf("%d spans of the start request; spans: %v", len(starts), names(spans))
	}
	start := starts[0]
	if start.TraceID != callerTraceID || start.ParentID != callerSpanID || start.Attributes["http.route"] != "/api/workflows/{workflow_id}/runs" ||
		start.Attributes["http.response.status_code"] != int64(201) || start.Kind.String() != "SPAN_KIND_SERVER" {
		t.Errorf("start request span = %+v, want a server span child of the caller's, with its route and status", start)
	}

	// One execution of the run, the start request's child.
	runs := find("workflow.run")
	if len(runs) != 1 {
		t.Fatalf("%d run spans, want 1; spans: %v", len(runs), names(spans))
	}
	run := runs[0]
	if run.TraceID != callerTraceID || run.ParentID != start.SpanID || run.Attributes["runstream.run.id"] != runID ||
		run.Attributes["runstream.run.status"] != "completed" || run.Attributes["runstream.run.outcome"] != "ended" {
		t.Errorf("run span = %+v, want the start request's child, completed", run)
	}

	// A span per node attempt, each the run span's child.
	var nodeSpans []otlptest.Span
	for _, s := range spans {
		if strings.HasPrefix(s.Name, "workflow.node ") {
			nodeSpans = append(nodeSpans, s)
			if s.TraceID != callerTraceID || s.ParentID != run.SpanID {
				t.Errorf("node span %q is not the run span's child: %+v", s.Name, s)
			}
			if s.Attributes["runstream.node.attempt"] != int64(1) || s.Attributes["runstream.node.status"] != "completed" {
				t.Errorf("node span %q: attempt %v, status %v", s.Name, s.Attributes["runstream.node.attempt"], s.Attributes["runstream.node.status"])
			}
		}
	}
	if len(nodeSpans) != 2 {
		t.Fatalf("%d node spans, want 2 (http, llm): %v", len(nodeSpans), names(spans))
	}
	httpNode, llmNode := find("workflow.node http"), find("workflow.node llm")
	if len(httpNode) != 1 || len(llmNode) != 1 {
		t.Fatalf("node spans %v, want one http and one llm", names(nodeSpans))
	}
	if got := llmNode[0].Attributes; got["runstream.node.type"] != "llm" || got["gen_ai.usage.input_tokens"] != int64(7) ||
		got["gen_ai.usage.output_tokens"] != int64(3) || got["gen_ai.request.model"] != "m" {
		t.Errorf("llm node span attributes %v, want its type, model and tokens", got)
	}

	// The outbound requests carried a traceparent of the run's trace, whose
	// parent is a client span under the node's span.
	for _, c := range []struct {
		what string
		seen []string
		node otlptest.Span
	}{{"http node", remoteSeen.all(), httpNode[0]}, {"llm call", llmSeen.all(), llmNode[0]}} {
		if len(c.seen) != 1 {
			t.Errorf("the %s's server got %d requests", c.what, len(c.seen))
			continue
		}
		parts := strings.Split(c.seen[0], "-")
		if len(parts) != 4 || parts[1] != callerTraceID {
			t.Errorf("the %s's request carried traceparent %q, want one of trace %s", c.what, c.seen[0], callerTraceID)
			continue
		}
		client, ok := byID[parts[2]]
		if !ok || client.Kind.String() != "SPAN_KIND_CLIENT" || client.ParentID != c.node.SpanID {
			t.Errorf("the %s's traceparent names span %+v, want a client span under the node's", c.what, client)
		}
	}

	// The resumed stream: one server span, named by its route, with its
	// resume, that lasted until the stream ended (it counts the bytes the
	// stream wrote after it took the connection over from its handler).
	var resumed bool
	for _, s := range find("GET /api/workflows/runs/{run_id}/stream") {
		for _, e := range s.Events {
			if e.Name == "stream.resume" && e.Attributes["runstream.stream.cursor"] == int64(2) {
				resumed = true
				if size, _ := s.Attributes["http.response.body.size"].(int64); size == 0 {
					t.Errorf("the stream span ended before the stream wrote its events: %v", s.Attributes)
				}
			}
		}
	}
	if !resumed {
		t.Errorf("no stream span with a stream.resume event at cursor 2; spans: %v", names(spans))
	}

	// Log correlation: the access log line of the start request names the
	// caller's trace.
	var logged bool
	sc := bufio.NewScanner(strings.NewReader(p.stderr.String()))
	for sc.Scan() {
		var line map[string]any
		if json.Unmarshal(sc.Bytes(), &line) == nil && line["msg"] == "request" && line["route"] == "POST /api/workflows/{workflow_id}/runs" &&
			line["trace_id"] == callerTraceID && line["span_id"] == start.SpanID {
			logged = true
		}
	}
	if !logged {
		t.Errorf("no access log line of the start request with trace_id %s and span_id %s:\n%s", callerTraceID, start.SpanID, p.stderr)
	}
}

// Without an OTEL_* variable, serve installs a no-op tracer provider:
// nothing is exported, no traceparent leaves with the nodes' requests
// (not even the caller's), and the log lines name no trace. Not
// parallel: it reads the process environment and the global provider.
func TestServeWithoutOTELTracesNothing(t *testing.T) {
	collector := otlptest.Start(t)
	for _, name := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_SDK_DISABLED", "OTEL_TRACES_EXPORTER"} {
		t.Setenv(name, "")
	}
	remote, llm, remoteSeen, llmSeen := tracedServers(t)
	p := runServe(t, nil, "--store", "memory:", "--workers", "1", "--http-node-allow", "127.0.0.0/8")
	if _, ok := otel.GetTracerProvider().(noop.TracerProvider); !ok {
		t.Errorf("the global tracer provider is %T, want noop.TracerProvider", otel.GetTracerProvider())
	}
	tracedRun(t, p.base, remote, llm)
	if err := p.stop(); err != nil {
		t.Fatalf("serve: %v", err)
	}
	if n := collector.Requests(); n != 0 {
		t.Errorf("the collector got %d export requests", n)
	}
	for _, seen := range append(remoteSeen.all(), llmSeen.all()...) {
		if seen != "" {
			t.Errorf("a node's request carried traceparent %q", seen)
		}
	}
	if llmSeen.askedUsage() {
		t.Error("an untraced llm call asked for its token usage")
	}
	if strings.Contains(p.stderr.String(), "trace_id") {
		t.Errorf("a log line names a trace:\n%s", p.stderr)
	}
}

func names(spans []otlptest.Span) []string {
	out := make([]string, len(spans))
	for i, s := range spans {
		out[i] = s.Name
	}
	return out
}

// An OTEL_* value runstream does not support stops serve with a usage
// error naming it, before it listens. Not parallel: it sets the process
// environment.
func TestServeRefusesUnsupportedOTEL(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")
	m := &Main{Getenv: func(string) string { return "" }, onListen: func(string) { t.Error("serve listens") }}
	err := m.Run(t.Context(), []string{"serve", "--addr", "127.0.0.1:0", "--store", "memory:"}, io.Discard, io.Discard)
	if exitCode(err) != 2 || !strings.Contains(fmt.Sprint(err), "OTEL_EXPORTER_OTLP_PROTOCOL") {
		t.Errorf("serve = %v, want a usage error naming OTEL_EXPORTER_OTLP_PROTOCOL", err)
	}
}
