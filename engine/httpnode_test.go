package engine_test

import (
	"encoding/json"
	"fmt"
	"github.com/runstream/runstream/engine/enginetest"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/engine"
	"github.com/runstream/runstream/workflow"
)

// runFlow runs one definition on a fresh engine, in real time, to its end.
func runFlow(t *testing.T, def, input string, edit func(*engine.Config)) (workflow.Run, []workflow.Envelope) {
	t.Helper()
	e := newEnv(t)
	e.start(t, edit)
	run := e.createRun(t, def, input)
	return e.waitTerminal(t, run.ID)
}

const secret = "Bearer s3cr3t-t0ken"

func TestHTTPNode(t *testing.T) {
	t.Parallel()
	var flaky atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/echo":
			if r.Header.Get("Authorization") != secret {
				http.Error(w, "no auth", http.StatusUnauthorized)
				return
			}
			body, _ := io.ReadAll(r.Body)
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"method":%q,"q":%q,"contentType":%q,"body":%q}`, r.Method, r.URL.Query().Get("q"), r.Header.Get("Content-Type"), body)
		case "/text":
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			io.WriteString(w, "plain words")
		case "/flaky":
			if flaky.Add(1) == 1 {
				http.Error(w, "try later", http.StatusServiceUnavailable)
				return
			}
			io.WriteString(w, "ok")
		case "/big":
			io.WriteString(w, strings.Repeat("x", 2000))
		case "/slow":
			select {
			case <-r.Context().Done():
			case <-time.After(5 * time.Second):
			}
		default:
			status := 404
			fmt.Sscanf(r.URL.Query().Get("status"), "%d", &status)
			w.WriteHeader(status)
		}
	}))
	t.Cleanup(srv.Close)

	t.Run("GetWithTemplates", func(t *testing.T) {
		t.Parallel()
		def := `{"name":"h","nodes":[{"id":"call","type":"http","config":{
			"url":"` + srv.URL + `/echo?q={{ input.q }}","headers":{"authorization":"{{ input.auth }}"}}}],"output":"call"}`
		run, events := runFlow(t, def, `{"q":"hello","auth":"`+secret+`"}`, allowLoopback)
		enginetest.CheckSequence(t, events, "run.created", "run.queued", "run.started",
			"node.queued:call", "node.started:call", "node.completed:call", "run.completed")
		var out struct {
			Status      int
			ContentType string
			Body        struct{ Method, Q string }
		}
		if err := json.Unmarshal(run.Output, &out); err != nil {
			t.Fatal(err)
		}
		if out.Status != 200 || out.ContentType != "application/json" || out.Body.Method != "GET" || out.Body.Q != "hello" {
			t.Errorf("output %s", run.Output)
		}
		noSecret(t, events)
	})
	t.Run("PostJSONBody", func(t *testing.T) {
		t.Parallel()
		def := `{"name":"h","nodes":[{"id":"call","type":"http","config":{"method":"post",
			"url":"` + srv.URL + `/echo","headers":{"Authorization":"Bearer {{ secrets.TOKEN }}"},"json":{"n":"{{ input.n }}","s":"n={{ input.n }}"}}}],"output":"call"}`
		run, events := runFlow(t, def, `{"n":3}`, allowLoopback)
		var out struct {
			Body struct{ Method, ContentType, Body string }
		}
		json.Unmarshal(run.Output, &out)
		if out.Body.Method != "POST" || out.Body.ContentType != "application/json" || out.Body.Body != `{"n":3,"s":"n=3"}` {
			t.Errorf("output %s", run.Output)
		}
		noSecret(t, events)
	})
	t.Run("TextBody", func(t *testing.T) {
		t.Parallel()
		run, _ := runFlow(t, `{"name":"h","nodes":[{"id":"call","type":"http","config":{"url":"`+srv.URL+`/text"}}],"output":"nodes.call.output.body"}`, `{}`, allowLoopback)
		if string(run.Output) != `"plain words"` {
			t.Errorf("output %s", run.Output)
		}
	})
	t.Run("RetriedAfter503", func(t *testing.T) {
		t.Parallel()
		def := `{"name":"h","nodes":[{"id":"call","type":"http","retry":{"maxAttempts":3,"backoffMs":10},"config":{"url":"` + srv.URL + `/flaky"}}],"output":"call"}`
		run, events := runFlow(t, def, `{}`, allowLoopback)
		enginetest.CheckSequence(t, events, "run.created", "run.queued", "run.started",
			"node.queued:call", "node.started:call", "node.failed:call", "node.started:call", "node.completed:call", "run.completed")
		var failed struct {
			Error struct {
				Code      runstream.ErrorCode
				Retryable bool
				Details   struct{ Status int }
			}
			WillRetry bool
		}
		enginetest.Data(t, events, workflow.EventNodeFailed, "call", 0, &failed)
		if failed.Error.Code != runstream.CodeWorkflowHTTPNodeError || !failed.Error.Retryable || !failed.WillRetry || failed.Error.Details.Status != 503 {
			t.Errorf("node.failed: %+v", failed)
		}
		if run.Status != workflow.StatusCompleted {
			t.Errorf("run %s", run.Status)
		}
	})
	tests := []struct {
		name      string
		path      string
		config    string
		retryable bool
		status    int
		message   string
	}{
		{name: "NotFound", path: "/missing", status: 404, message: "answered 404"},
		{name: "Forbidden", path: "/x?status=403&token={{ secrets.TOKEN }}", status: 403, message: "answered 403"},
		{name: "TooManyRequests", path: "/x?status=429", retryable: true, status: 429, message: "answered 429"},
		{name: "ServerError", path: "/x?status=500", retryable: true, status: 500, message: "answered 500"},
		{name: "TooBig", path: "/big", config: `,"maxResponseBytes":1000`, status: 200, message: "exceeds 1000 bytes"},
		{name: "Timeout", path: "/slow", config: `,"timeoutMs":100`, retryable: true, message: "did not answer within 100 ms"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			def := `{"name":"h","nodes":[{"id":"call","type":"http","retry":{"maxAttempts":2,"backoffMs":1},"config":{"url":"` + srv.URL + tc.path + `"` + tc.config + `}}]}`
			run, events := runFlow(t, def, `{}`, allowLoopback)
			want := []string{"run.created", "run.queued", "run.started", "node.queued:call", "node.started:call", "node.failed:call"}
			if tc.retryable {
				want = append(want, "node.started:call", "node.failed:call")
			}
			enginetest.CheckSequence(t, events, append(want, "run.failed")...)
			var failed struct {
				Error struct {
					Code      runstream.ErrorCode
					Message   string
					Retryable bool
					NodeID    string
					Details   struct{ Status int }
				}
			}
			enginetest.Data(t, events, workflow.EventRunFailed, "", 0, &failed)
			e := failed.Error
			if e.Code != runstream.CodeWorkflowHTTPNodeError || e.Retryable != tc.retryable || e.Details.Status != tc.status || e.NodeID != "call" || !strings.Contains(e.Message, tc.message) {
				t.Errorf("run.failed error: %+v", e)
			}
			if strings.Contains(string(run.Error), "s3cr3t") {
				t.Errorf("the error shows the query: %s", run.Error)
			}
		})
	}
}

// noSecret fails when an event holds the secret header value.
func noSecret(t *testing.T, events []workflow.Envelope) {
	t.Helper()
	for _, e := range events {
		if strings.Contains(string(e.Data), "s3cr3t") {
			t.Errorf("seq %d (%s) holds the secret: %s", e.Seq, e.Event, e.Data)
		}
	}
}

func TestHTTPNodeConfig(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, config, want string }{
		{"NoURL", `{}`, "url is required"},
		{"BadMethod", `{"url":"http://x","method":"TRACE"}`, "method must be one of"},
		{"ReservedHeader", `{"url":"http://x","headers":{"host":"y"}}`, "Host is set by the server"},
		{"BadHeaderName", `{"url":"http://x","headers":{"a b":"y"}}`, "not valid"},
		{"BodyAndJSON", `{"url":"http://x","body":"a","json":{}}`, "not both"},
		{"LongTimeout", `{"url":"http://x","timeoutMs":31000}`, "timeoutMs must be"},
		{"BigCap", `{"url":"http://x","maxResponseBytes":99999999}`, "maxResponseBytes must be"},
		{"BadTemplate", `{"url":"http://x/{{ nope( }}"}`, "url: template"},
		{"UnknownField", `{"url":"http://x","apiKey":"k"}`, "unknown field"},
	}
	r := engine.DefaultRegistry()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := r.CompileJSON([]byte(`{"name":"h","nodes":[{"id":"call","type":"http","config":` + tc.config + `}]}`))
			re := runstream.AsError(err)
			if re == nil || re.Code != runstream.CodeWorkflowDefinitionInvalid || re.NodeID != "call" || !strings.Contains(re.Message, tc.want) {
				t.Errorf("err = %v, want WORKFLOW_DEFINITION_INVALID about %q", err, tc.want)
			}
		})
	}
}

// The scripted provider calls the http_get tool for real when its script
// gives no output; a failing call is the tool's error, not the node's.
func TestScriptedRealToolCall(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/gone" {
			http.Error(w, "gone", http.StatusGone)
			return
		}
		io.WriteString(w, "page "+r.URL.Path)
	}))
	t.Cleanup(srv.Close)
	def := `{"name":"research","nodes":[{"id":"ask","type":"llm","config":{"provider":"scripted","text":"done","toolCalls":[
		{"id":"c1","name":"http_get","input":{"url":"{{ input.base }}/a"}},
		{"id":"c2","name":"http_get","input":{"url":"{{ input.base }}/gone"}}]}}],"output":"ask"}`
	run, events := runFlow(t, def, `{"base":"`+srv.URL+`"}`, allowLoopback)
	enginetest.CheckSequence(t, events, "run.created", "run.queued", "run.started", "node.queued:ask", "node.started:ask",
		"node.tool.started:ask", "node.tool.finished:ask", "node.tool.started:ask", "node.tool.finished:ask",
		"node.output.delta:ask", "node.completed:ask", "run.completed")
	var started struct{ InputSummary struct{ URL string } }
	enginetest.Data(t, events, workflow.EventNodeToolStarted, "ask", 0, &started)
	if started.InputSummary.URL != srv.URL+"/a" {
		t.Errorf("inputSummary %+v", started.InputSummary)
	}
	var ok, failed struct {
		Status        string
		OutputSummary struct{ Status int }
		Error         struct{ Code runstream.ErrorCode }
	}
	enginetest.Data(t, events, workflow.EventNodeToolFinished, "ask", 0, &ok)
	enginetest.Data(t, events, workflow.EventNodeToolFinished, "ask", 1, &failed)
	if ok.Status != "ok" || ok.OutputSummary.Status != 200 || failed.Status != "error" || failed.Error.Code != runstream.CodeWorkflowHTTPNodeError {
		t.Errorf("tool.finished: %+v then %+v", ok, failed)
	}
	var out struct {
		Text      string
		ToolCalls []struct {
			ID, Status, Error string
			Output            struct{ Body string }
		}
	}
	json.Unmarshal(run.Output, &out)
	if len(out.ToolCalls) != 2 || out.ToolCalls[0].Output.Body != "page /a" || out.ToolCalls[1].Status != "error" || !strings.Contains(out.ToolCalls[1].Error, "answered 410") {
		t.Errorf("output %s", run.Output)
	}
	// A call of a tool the provider lacks, without a scripted output, is
	// refused at publish time.
	_, err := engine.DefaultRegistry().CompileJSON([]byte(`{"name":"x","nodes":[{"id":"a","type":"llm","config":{"provider":"scripted","toolCalls":[{"id":"c","name":"sql_query"}]}}]}`))
	if runstream.ErrorCodeOf(err) != runstream.CodeWorkflowDefinitionInvalid || !strings.Contains(err.Error(), "sql_query") {
		t.Errorf("unknown tool: %v", err)
	}
}

// allowLoopback gives the engine the built-in node types with the http
// node and the http_get tool allowed to reach loopback, where the tests'
// servers listen.
func allowLoopback(c *engine.Config) {
	c.Registry = httpRegistry("127.0.0.0/8,::1")
}

// httpRegistry returns the built-in node types with the http node and the
// http_get tool under the allow list allow.
func httpRegistry(allow string) *engine.Registry {
	list, err := engine.ParseHTTPAllowList(allow)
	if err != nil {
		panic(err)
	}
	// The secret TOKEN makes the Authorization header of the tests.
	opts := engine.HTTPOptions{Allow: list, Secrets: engine.MapSecrets{"TOKEN": strings.TrimPrefix(secret, "Bearer ")}}
	r, err := engine.NewRegistry(engine.LLM(engine.ScriptedProvider(engine.HTTPGetTool(opts))),
		engine.HumanInput(), engine.Transform(), engine.Delay(), engine.HTTP(opts))
	if err != nil {
		panic(err)
	}
	return r
}
