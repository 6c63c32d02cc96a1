package openaillm_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/engine"
	"github.com/runstream/runstream/engine/enginetest"
	"github.com/runstream/runstream/engine/openaillm"
	"github.com/runstream/runstream/memory"
	"github.com/runstream/runstream/workflow"
)

// fakeLLM is an OpenAI-compatible chat-completions endpoint that streams
// the chunks respond returns for the n-th request (from 0): each is sent
// as a "data:" line; "[DONE]" is sent after them unless cut is set.
type fakeLLM struct {
	url     string
	respond func(n int, req request) (status int, chunks []string, cut bool)

	mu       sync.Mutex
	requests []request
	auth     []string
}

// request is what the fake reads of a request.
type request struct {
	Model    string `json:"model"`
	Stream   bool   `json:"stream"`
	Messages []struct {
		Role       string          `json:"role"`
		Content    json.RawMessage `json:"content"`
		ToolCallID string          `json:"tool_call_id"`
		ToolCalls  []struct {
			ID       string `json:"id"`
			Function struct{ Name, Arguments string }
		} `json:"tool_calls"`
	} `json:"messages"`
	Tools []struct {
		Type     string `json:"type"`
		Function struct {
			Name       string          `json:"name"`
			Parameters json.RawMessage `json:"parameters"`
		} `json:"function"`
	} `json:"tools"`
}

func newFake(t *testing.T, respond func(n int, req request) (int, []string, bool)) *fakeLLM {
	t.Helper()
	f := &fakeLLM{respond: respond}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != "POST" || r.URL.Path != "/v1/chat/completions" {
			http.Error(w, "not here", http.StatusNotFound)
			return
		}
		var req request
		body, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(body, &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		f.mu.Lock()
		n := len(f.requests)
		f.requests = append(f.requests, req)
		f.auth = append(f.auth, r.Header.Get("Authorization"))
		f.mu.Unlock()
		status, chunks, cut := f.respond(n, req)
		if status != http.StatusOK {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			io.WriteString(w, `{"error":{"message":"Incorrect API key provided: sk-leak","type":"invalid_request_error","code":"invalid_api_key"}}`)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		for _, c := range chunks {
			fmt.Fprintf(w, "data: %s\n\n", c)
			w.(http.Flusher).Flush()
		}
		if !cut {
			io.WriteString(w, "data: [DONE]\n\n")
		}
	}))
	t.Cleanup(srv.Close)
	f.url = srv.URL + "/v1"
	return f
}

func (f *fakeLLM) seen() ([]request, []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.requests), slices.Clone(f.auth)
}

func chunk(delta string) string {
	return `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-test","choices":[{"index":0,"delta":` + delta + `,"finish_reason":null}]}`
}

func finish(reason string) string {
	return `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-test","choices":[{"index":0,"delta":{},"finish_reason":"` + reason + `"}]}`
}

func content(s string) string {
	b, _ := json.Marshal(s)
	return chunk(`{"role":"assistant","content":` + string(b) + `}`)
}

// flow runs one llm node with provider openai against the fake.
func flow(t *testing.T, opts openaillm.Options, config string, retry string) (workflow.Run, []workflow.Envelope) {
	t.Helper()
	reg, err := engine.NewRegistry(engine.LLM(openaillm.Provider(opts)))
	if err != nil {
		t.Fatal(err)
	}
	def := `{"name":"ask","nodes":[{"id":"ask","type":"llm",` + retry + `"config":` + config + `}],"output":"ask"}`
	if _, err := reg.CompileJSON([]byte(def)); err != nil {
		t.Fatal(err)
	}
	store := memory.NewWorkflowStore()
	t.Cleanup(func() { store.Close() })
	return enginetest.Start(t, store, reg, nil).Run(t, def, `{"topic":"pears"}`)
}

func noLeak(t *testing.T, events []workflow.Envelope, secrets ...string) {
	t.Helper()
	for _, e := range events {
		for _, s := range secrets {
			if strings.Contains(string(e.Data), s) {
				t.Errorf("seq %d (%s) holds %q: %s", e.Seq, e.Event, s, e.Data)
			}
		}
	}
}

// A tool call round trip: the model streams some text and a tool call
// (its arguments split over chunks), the engine runs http_get and sends
// the result back, the model answers.
func TestToolCallRoundTrip(t *testing.T) {
	t.Parallel()
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "hello from the page")
	}))
	t.Cleanup(page.Close)
	args := `{"url":"` + page.URL + `/doc"}`
	head, _ := json.Marshal(args[:len(args)/2])
	tail, _ := json.Marshal(args[len(args)/2:])
	fake := newFake(t, func(n int, req request) (int, []string, bool) {
		if n == 0 {
			return 200, []string{
				content("Let me look. "),
				chunk(`{"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"http_get","arguments":""}}]}`),
				chunk(`{"tool_calls":[{"index":0,"function":{"arguments":` + string(head) + `}}]}`),
				chunk(`{"tool_calls":[{"index":0,"function":{"arguments":` + string(tail) + `}}]}`),
				finish("tool_calls"),
			}, false
		}
		return 200, []string{content("The "), content("page "), content("says hello."), finish("stop")}, false
	})
	opts := openaillm.Options{APIKey: "test-key-123", KeyBaseURLs: []string{fake.url}, Tools: []engine.Tool{engine.HTTPGetTool(loopbackHTTP(t))}}
	run, events := flow(t, opts, `{"provider":"openai","baseURL":"`+fake.url+`","model":"gpt-test","system":"You research {{ input.topic }}.","prompt":"Tell me about {{ input.topic }}.","tools":["http_get"]}`, "")
	want := []string{"run.created", "run.queued", "run.started", "node.queued:ask", "node.started:ask",
		"node.output.delta:ask", "node.tool.started:ask", "node.tool.finished:ask", "node.output.delta:ask",
		"node.completed:ask", "run.completed"}
	if got := enginetest.Sequence(events); !slices.Equal(got, want) {
		t.Fatalf("events:\n%s", strings.Join(got, "\n"))
	}
	if text := enginetest.Text(events, "ask", "text"); text != "Let me look. The page says hello." {
		t.Errorf("streamed text %q", text)
	}
	var started struct {
		ToolCallID, Name string
		InputSummary     struct{ URL string }
	}
	enginetest.Data(t, events, workflow.EventNodeToolStarted, "ask", 0, &started)
	if started.ToolCallID != "call_a" || started.Name != "http_get" || started.InputSummary.URL != page.URL+"/doc" {
		t.Errorf("node.tool.started %+v", started)
	}
	var finished struct {
		Status        string
		OutputSummary struct{ Status int }
	}
	enginetest.Data(t, events, workflow.EventNodeToolFinished, "ask", 0, &finished)
	if finished.Status != "ok" || finished.OutputSummary.Status != 200 {
		t.Errorf("node.tool.finished %+v", finished)
	}
	var out struct {
		Text      string
		ToolCalls []struct {
			ID, Name, Status string
			Output           struct{ Body string }
		}
	}
	json.Unmarshal(run.Output, &out)
	if out.Text != "Let me look. The page says hello." || len(out.ToolCalls) != 1 || out.ToolCalls[0].Output.Body != "hello from the page" {
		t.Errorf("output %s", run.Output)
	}

	reqs, auth := fake.seen()
	if len(reqs) != 2 || !slices.Equal(auth, []string{"Bearer test-key-123", "Bearer test-key-123"}) {
		t.Fatalf("%d requests with auth %q", len(reqs), auth)
	}
	first, second := reqs[0], reqs[1]
	if first.Model != "gpt-test" || !first.Stream || len(first.Tools) != 1 || first.Tools[0].Function.Name != "http_get" || !json.Valid(first.Tools[0].Function.Parameters) {
		t.Errorf("first request %+v", first)
	}
	if len(first.Messages) != 2 || string(first.Messages[0].Content) != `"You research pears."` || string(first.Messages[1].Content) != `"Tell me about pears."` {
		t.Errorf("first messages %+v", first.Messages)
	}
	if len(second.Messages) != 4 {
		t.Fatalf("second request has %d messages", len(second.Messages))
	}
	assistant, tool := second.Messages[2], second.Messages[3]
	if assistant.Role != "assistant" || len(assistant.ToolCalls) != 1 || assistant.ToolCalls[0].ID != "call_a" ||
		assistant.ToolCalls[0].Function.Arguments != `{"url":"`+page.URL+`/doc"}` {
		t.Errorf("assistant message %+v", assistant)
	}
	if tool.Role != "tool" || tool.ToolCallID != "call_a" || !strings.Contains(string(tool.Content), "hello from the page") {
		t.Errorf("tool message %+v", tool)
	}
	noLeak(t, events, "test-key-123")
}

// A provider error in the middle of the stream fails the attempt with a
// retryable WORKFLOW_LLM_PROVIDER_ERROR that quotes nothing of the
// provider's message; the next attempt completes.
func TestErrorMidStream(t *testing.T) {
	t.Parallel()
	fake := newFake(t, func(n int, _ request) (int, []string, bool) {
		if n == 0 {
			return 200, []string{content("partial "), `{"error":{"message":"overloaded, key sk-leak","type":"server_error"}}`}, true
		}
		return 200, []string{content("fine"), finish("stop")}, false
	})
	run, events := flow(t, openaillm.Options{}, `{"provider":"openai","baseURL":"`+fake.url+`","model":"m","prompt":"hi"}`, `"retry":{"maxAttempts":2,"backoffMs":1},`)
	want := []string{"run.created", "run.queued", "run.started", "node.queued:ask",
		"node.started:ask", "node.output.delta:ask", "node.failed:ask",
		"node.started:ask", "node.output.delta:ask", "node.completed:ask", "run.completed"}
	if got := enginetest.Sequence(events); !slices.Equal(got, want) {
		t.Fatalf("events:\n%s", strings.Join(got, "\n"))
	}
	var failed struct {
		Error struct {
			Code      runstream.ErrorCode
			Message   string
			Retryable bool
		}
		WillRetry bool
	}
	enginetest.Data(t, events, workflow.EventNodeFailed, "ask", 0, &failed)
	if failed.Error.Code != runstream.CodeWorkflowLLMProviderError || !failed.Error.Retryable || !failed.WillRetry || !strings.Contains(failed.Error.Message, "middle of the stream") {
		t.Errorf("node.failed %+v", failed)
	}
	if string(run.Output) != `{"text":"fine"}` {
		t.Errorf("output %s", run.Output)
	}
	if _, auth := fake.seen(); auth[0] != "" {
		t.Errorf("without a key the provider sent Authorization %q", auth[0])
	}
	noLeak(t, events, "sk-leak", "overloaded")
}

func TestProviderFailures(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		status    int
		chunks    []string
		cut       bool
		retryable bool
		message   string
	}{
		{name: "Unauthorized", status: 401, message: "answered HTTP 401"},
		{name: "RateLimited", status: 429, retryable: true, message: "answered HTTP 429"},
		{name: "ServerError", status: 500, retryable: true, message: "answered HTTP 500"},
		{name: "StreamCut", status: 200, chunks: []string{content("half an ans")}, cut: true, retryable: true, message: "broke the stream"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			fake := newFake(t, func(int, request) (int, []string, bool) { return tc.status, tc.chunks, tc.cut })
			_, events := flow(t, openaillm.Options{APIKey: "sk-leak"}, `{"provider":"openai","baseURL":"`+fake.url+`","model":"m","prompt":"hi"}`, `"retry":{"maxAttempts":2,"backoffMs":1},`)
			var failed struct {
				Error struct {
					Code      runstream.ErrorCode
					Message   string
					Retryable bool
					NodeID    string
				}
				FailedNodeID string
			}
			enginetest.Data(t, events, workflow.EventRunFailed, "", 0, &failed)
			e := failed.Error
			if e.Code != runstream.CodeWorkflowLLMProviderError || e.Retryable != tc.retryable || e.NodeID != "ask" || !strings.Contains(e.Message, tc.message) {
				t.Errorf("run.failed %+v", failed)
			}
			wantAttempts := 1
			if tc.retryable {
				wantAttempts = 2
			}
			if reqs, _ := fake.seen(); len(reqs) != wantAttempts {
				t.Errorf("%d requests, want %d", len(reqs), wantAttempts)
			}
			noLeak(t, events, "sk-leak", "Incorrect API key")
		})
	}
}

func TestConfigRules(t *testing.T) {
	t.Parallel()
	reg, err := engine.NewRegistry(engine.LLM(openaillm.Provider(openaillm.Options{Tools: []engine.Tool{engine.HTTPGetTool(loopbackHTTP(t))}})))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct{ name, config, want string }{
		{"APIKeyInDefinition", `{"provider":"openai","model":"m","prompt":"p","apiKey":"sk-in-definition"}`, "never holds the API key"},
		{"Authorization", `{"provider":"openai","model":"m","prompt":"p","Authorization":"Bearer x"}`, "never holds the API key"},
		{"CredentialsInURL", `{"provider":"openai","baseURL":"https://u:sk-x@llm.example/v1","model":"m","prompt":"p"}`, "no credentials"},
		{"NoModel", `{"provider":"openai","prompt":"p"}`, "model is required"},
		{"NoPrompt", `{"provider":"openai","model":"m"}`, "prompt is required"},
		{"UnknownTool", `{"provider":"openai","model":"m","prompt":"p","tools":["sql_query"]}`, `"sql_query" is not available`},
		{"TooManyRounds", `{"provider":"openai","model":"m","prompt":"p","maxToolRounds":99}`, "maxToolRounds"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := reg.CompileJSON([]byte(`{"name":"x","nodes":[{"id":"ask","type":"llm","config":` + tc.config + `}]}`))
			re := runstream.AsError(err)
			if re == nil || re.Code != runstream.CodeWorkflowDefinitionInvalid || !strings.Contains(re.Message, tc.want) {
				t.Fatalf("err = %v, want one about %q", err, tc.want)
			}
			if strings.Contains(re.Message, "sk-") {
				t.Errorf("the error quotes the key: %s", re.Message)
			}
		})
	}
}

// loopbackHTTP returns HTTP options that allow loopback, where the tests'
// servers listen.
func loopbackHTTP(t *testing.T) engine.HTTPOptions {
	t.Helper()
	allow, err := engine.ParseHTTPAllowList("127.0.0.0/8,::1")
	if err != nil {
		t.Fatal(err)
	}
	return engine.HTTPOptions{Allow: allow}
}

// A definition that names a baseURL the server did not list is sent no
// key: an author cannot make the server hand its key to a host of theirs.
func TestKeyOnlyToListedBases(t *testing.T) {
	t.Parallel()
	fake := newFake(t, func(int, request) (int, []string, bool) {
		return 200, []string{content("ok"), finish("stop")}, false
	})
	run, _ := flow(t, openaillm.Options{APIKey: "sk-server-key"}, `{"provider":"openai","baseURL":"`+fake.url+`","model":"m","prompt":"hi"}`, "")
	if run.Status != workflow.StatusCompleted {
		t.Fatalf("run %s: %s", run.Status, run.Error)
	}
	if _, auth := fake.seen(); len(auth) != 1 || auth[0] != "" {
		t.Errorf("a base the server did not list got Authorization %q", auth)
	}
}
