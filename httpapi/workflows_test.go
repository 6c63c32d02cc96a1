package httpapi_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/engine/enginetest"
	"github.com/runstream/runstream/httpapi"
	"github.com/runstream/runstream/internal/apitest"
	"github.com/runstream/runstream/internal/servertest"
	"github.com/runstream/runstream/live"
	"github.com/runstream/runstream/memory"
	"github.com/runstream/runstream/workflowsvc"
)

const simpleFlow = `{"name":"simple","description":"waits","inputSchema":{"type":"object","required":["n"],"properties":{"n":{"type":"integer","minimum":1}}},
	"nodes":[{"id":"wait","type":"delay","config":{"ms":1}}],"output":"input.n * 2"}`

func TestPublishWorkflow(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	body := must(t, http.StatusCreated)(s.post(t, "/api/workflows", `{"name":"Mine","description":"my flow","definition":`+simpleFlow+`}`))
	id, _ := body["workflowId"].(string)
	latest, _ := body["latestVersion"].(map[string]any)
	if !strings.HasPrefix(id, "wf_") || body["name"] != "Mine" || body["description"] != "my flow" || latest == nil ||
		!strings.HasPrefix(latest["versionId"].(string), "wv_") || latest["version"] != float64(1) || body["latestVersionId"] != latest["versionId"] {
		t.Fatalf("created: %v", body)
	}
	got := must(t, http.StatusOK)(s.get(t, "/api/workflows/"+id))
	def, _ := json.Marshal(got["latestVersion"].(map[string]any)["definition"])
	var want any
	json.Unmarshal([]byte(simpleFlow), &want)
	wantJSON, _ := json.Marshal(want)
	if string(def) != string(wantJSON) {
		t.Errorf("stored definition %s, want %s", def, wantJSON)
	}
	// A bare definition names the workflow itself.
	bare := must(t, http.StatusCreated)(s.post(t, "/api/workflows", simpleFlow))
	if bare["name"] != "simple" || bare["description"] != "waits" {
		t.Errorf("bare definition: %v", bare)
	}
	wantError(t, "another user", 404, runstream.CodeWorkflowNotFound)(s.get(t, "/api/workflows/"+id, "X-User", "mallory"))
	wantError(t, "unknown", 404, runstream.CodeWorkflowNotFound)(s.get(t, "/api/workflows/wf_nope"))
}

func TestPublishYAML(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	yamlBody := `
name: From YAML
definition:
  name: approval
  nodes:
    - id: draft
      type: llm
      config: {provider: scripted, text: "A draft"}
    - id: ask
      type: human_input
      needs: [draft]
      config:
        actions: [approve, reject]
  output: ask
`
	for _, ct := range []string{"application/yaml", "text/yaml; charset=utf-8"} {
		body := must(t, http.StatusCreated)(s.call(t, "POST", "/api/workflows", ct, yamlBody))
		def := body["latestVersion"].(map[string]any)["definition"].(map[string]any)
		nodes := def["nodes"].([]any)
		if body["name"] != "From YAML" || def["name"] != "approval" || len(nodes) != 2 || def["output"] != "ask" {
			t.Errorf("%s: %v", ct, body)
		}
	}
	wantError(t, "bad YAML", 400, runstream.CodeInvalidArgument)(s.call(t, "POST", "/api/workflows", "application/yaml", "name: [oops\n"))
	wantError(t, "YAML with a cycle", 422, runstream.CodeWorkflowDefinitionInvalid)(s.call(t, "POST", "/api/workflows", "application/yaml",
		"name: c\nnodes:\n  - {id: a, type: delay, needs: [b], config: {ms: 1}}\n  - {id: b, type: delay, needs: [a], config: {ms: 1}}\n"))
	wantError(t, "text/plain", 415, runstream.CodeUnsupportedMediaType)(s.call(t, "POST", "/api/workflows", "text/plain", "name: x"))
}

func TestPublishInvalidDefinition(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	for _, tc := range []struct {
		def, rule, node string
	}{
		{`{"name":"x","nodes":[{"id":"a","type":"warp"}]}`, "unknown_type", "a"},
		{`{"name":"x","nodes":[{"id":"a","type":"delay","config":{"ms":1},"needs":["zz"]}]}`, "unknown_need", "a"},
		{`{"name":"x","nodes":[{"id":"a","type":"delay","config":{"ms":1}},{"id":"a","type":"delay","config":{"ms":1}}]}`, "duplicate_id", "a"},
		{`{"name":"x","nodes":[{"id":"a","type":"delay","config":{"ms":"soon"}}]}`, "invalid_config", "a"},
		{`{"name":"x","inputSchema":{"type":"thing"},"nodes":[{"id":"a","type":"delay","config":{"ms":1}}]}`, "invalid_schema", ""},
	} {
		body := wantError(t, tc.rule, 422, runstream.CodeWorkflowDefinitionInvalid)(s.post(t, "/api/workflows", `{"definition":`+tc.def+`}`))
		details, _ := body["details"].(map[string]any)
		if details["rule"] != tc.rule || (tc.node != "" && body["nodeId"] != tc.node) {
			t.Errorf("%s: %v", tc.rule, body)
		}
	}
	// A credential written in an http node, inside an expression or not:
	// refused, naming the header, neither echoed nor stored.
	key := "ghp_" + strings.Repeat("a1B2", 9)
	for _, header := range []string{`"X-Foo":"Bearer ` + key + `"`, `"Authorization":"Bearer {{ \"` + key + `\" }}"`} {
		def := `{"name":"x","nodes":[{"id":"call","type":"http","config":{"url":"https://api.example.com/","headers":{` + header + `}}}]}`
		body := wantError(t, "literal credential", 422, runstream.CodeWorkflowDefinitionInvalid)(s.post(t, "/api/workflows", `{"definition":`+def+`}`))
		details, _ := body["details"].(map[string]any)
		if details["rule"] != "literal_credential" || body["nodeId"] != "call" || strings.Contains(fmt.Sprint(body), "a1B2") {
			t.Errorf("%s: %v, want literal_credential on call without the key", header, body)
		}
	}
	// A credential anywhere else in a definition (it is stored and served
	// back as published): refused, naming where, neither echoed nor stored.
	dsn := "postgres://admin:S3cretPassQ9@db.internal:5432/prod"
	for _, tc := range []struct{ body, path string }{
		{`{"name":"lit","description":"db ` + dsn + `","nodes":[{"id":"a","type":"delay","config":{"ms":1}}]}`, "/description"},
		{`{"name":"lit","nodes":[{"id":"a","type":"transform","config":{"expression":"\"` + dsn + `\""}}],"output":"a"}`, "/nodes/0/config/expression"},
		{`{"name":"lit","nodes":[{"id":"a","type":"llm","config":{"provider":"scripted","text":"the key is ` + key + `"}}],"output":"a"}`, "/nodes/0/config/text"},
		{`{"name":"lit","inputSchema":{"type":"object","examples":[{"token":"` + key + `"}]},"nodes":[{"id":"a","type":"delay","config":{"ms":1}}]}`, "/inputSchema/examples/0/token"},
		{`{"name":"db ` + dsn + `","definition":{"name":"lit","nodes":[{"id":"a","type":"delay","config":{"ms":1}}]}}`, "/name"},
		// Not a valid expression: refused as a credential before the
		// compile, whose error would quote it.
		{`{"name":"lit","nodes":[{"id":"a","type":"transform","config":{"expression":"` + key + `"}}],"output":"a"}`, "/nodes/0/config/expression"},
	} {
		body := wantError(t, "literal credential", 422, runstream.CodeWorkflowDefinitionInvalid)(s.post(t, "/api/workflows", tc.body))
		details, _ := body["details"].(map[string]any)
		if details["rule"] != "literal_credential" || details["path"] != tc.path || strings.Contains(fmt.Sprint(body), "S3cret") || strings.Contains(fmt.Sprint(body), "a1B2") {
			t.Errorf("%s: %v, want literal_credential at %s without the secret", tc.path, body, tc.path)
		}
	}
	if page := must(t, http.StatusOK)(s.get(t, "/api/workflows")); len(workflowIDs(page["workflows"])) != 0 {
		t.Errorf("refused definitions were stored: %v", page)
	}
	// Naming credentials is not holding one.
	s.publish(t, `{"name":"names","nodes":[{"id":"a","type":"transform","config":{"expression":"{\"token\": input.token, \"password\": \"see the vault\"}"}}],"output":"a"}`)
	wantError(t, "unknown request field", 400, runstream.CodeInvalidArgument)(s.post(t, "/api/workflows", `{"definition":`+simpleFlow+`,"owner":"x"}`))
	wantError(t, "duplicate key", 400, runstream.CodeInvalidJSON)(s.post(t, "/api/workflows", `{"name":"a","name":"b"}`))
}

func TestListWorkflowsPaged(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	var ids []string
	for range 3 {
		ids = append(ids, s.publish(t, simpleFlow))
	}
	s.call(t, "POST", "/api/workflows", "application/json", simpleFlow, "X-User", "mallory")
	page := must(t, http.StatusOK)(s.get(t, "/api/workflows?limit=2"))
	next, _ := page["nextBefore"].(string)
	if got := workflowIDs(page["workflows"]); !slices.Equal(got, []string{ids[2], ids[1]}) || page["hasMore"] != true || next != ids[1] {
		t.Fatalf("first page: %v", page)
	}
	page = must(t, http.StatusOK)(s.get(t, "/api/workflows?limit=2&before="+next))
	if got := workflowIDs(page["workflows"]); !slices.Equal(got, []string{ids[0]}) || page["hasMore"] != false {
		t.Errorf("second page: %v", page)
	}
	wantError(t, "limit 0", 400, runstream.CodeInvalidArgument)(s.get(t, "/api/workflows?limit=0"))
}

// workflowIDs returns the workflowId of each workflow of a listing.
func workflowIDs(v any) []string { return idsOf(v, "workflowId") }

// runIDs returns the runId of each run of a listing.
func runIDs(v any) []string { return idsOf(v, "runId") }

func idsOf(v any, key string) []string {
	var out []string
	for _, w := range v.([]any) {
		id, _ := w.(map[string]any)[key].(string)
		out = append(out, id)
	}
	return out
}

func TestVersionsAndRuns(t *testing.T) {
	t.Parallel()
	s := newServer(t) // no engine: runs stay queued
	wf := s.publish(t, simpleFlow)
	first := must(t, http.StatusOK)(s.get(t, "/api/workflows/"+wf))["latestVersionId"].(string)
	v2 := must(t, http.StatusCreated)(s.post(t, "/api/workflows/"+wf+"/versions",
		`{"definition":{"name":"simple","nodes":[{"id":"wait","type":"delay","config":{"ms":2}}]}}`))
	if v2["version"] != float64(2) || v2["workflowId"] != wf {
		t.Fatalf("version 2: %v", v2)
	}
	if got := must(t, http.StatusOK)(s.get(t, "/api/workflows/"+wf)); got["latestVersionId"] != v2["versionId"] {
		t.Errorf("latest version %v, want %v", got["latestVersionId"], v2["versionId"])
	}
	wantError(t, "invalid version", 422, runstream.CodeWorkflowDefinitionInvalid)(s.post(t, "/api/workflows/"+wf+"/versions", `{"definition":{"name":"x","nodes":[]}}`))
	wantError(t, "version of another user's workflow", 404, runstream.CodeWorkflowNotFound)(s.post(t, "/api/workflows/"+wf+"/versions", simpleFlow, "X-User", "mallory"))

	// Runs of the latest version take any input; version 1 checks its
	// inputSchema.
	latest := must(t, http.StatusCreated)(s.post(t, "/api/workflows/"+wf+"/runs", `{}`))
	if latest["versionId"] != v2["versionId"] || latest["status"] != "queued" || !strings.HasPrefix(latest["runId"].(string), "run_") {
		t.Errorf("run of the latest version: %v", latest)
	}
	body := wantError(t, "input invalid", 422, runstream.CodeWorkflowInputInvalid)(s.post(t, "/api/workflows/"+wf+"/runs", `{"versionId":"`+first+`","input":{"n":0}}`))
	if !strings.Contains(string(mustJSON(body["details"])), `"/n"`) {
		t.Errorf("input problems: %v", body["details"])
	}
	// An input that fails in thousands of places gets a short answer.
	integers := s.publish(t, `{"name":"integers","inputSchema":{"type":"object","properties":{"xs":{"type":"array","items":{"type":"integer"}}}},
		"nodes":[{"id":"wait","type":"delay","config":{"ms":1}}]}`)
	many := `{"input":{"xs":[` + strings.TrimSuffix(strings.Repeat(`"`+strings.Repeat("v", 60)+`",`, 5000), ",") + `]}}`
	body = wantError(t, "input invalid in many places", 422, runstream.CodeWorkflowInputInvalid)(s.post(t, "/api/workflows/"+integers+"/runs", many))
	if size := len(mustJSON(body)); size > 8<<10 || body["details"].(map[string]any)["problems_total"] != float64(5000) {
		t.Errorf("an input failing in 5,000 places got an answer of %d bytes: %.300s", size, mustJSON(body))
	}
	old := must(t, http.StatusCreated)(s.post(t, "/api/workflows/"+wf+"/runs", `{"versionId":"`+first+`","input":{"n":3}}`))
	if old["versionId"] != first || old["input"].(map[string]any)["n"] != float64(3) {
		t.Errorf("run of version 1: %v", old)
	}
	wantError(t, "unknown version", 404, runstream.CodeWorkflowVersionNotFound)(s.post(t, "/api/workflows/"+wf+"/runs", `{"versionId":"wv_nope"}`))
	wantError(t, "another user's workflow", 404, runstream.CodeWorkflowNotFound)(s.post(t, "/api/workflows/"+wf+"/runs", `{}`, "X-User", "mallory"))
	wantError(t, "unknown field", 400, runstream.CodeInvalidArgument)(s.post(t, "/api/workflows/"+wf+"/runs", `{"inputs":{}}`))

	// The run is listed, filtered and paged.
	other := s.publish(t, simpleFlow)
	third := must(t, http.StatusCreated)(s.post(t, "/api/workflows/"+other+"/runs", `{"input":{"n":1}}`))
	must(t, http.StatusAccepted)(s.post(t, "/api/workflows/runs/"+third["runId"].(string)+"/cancel", ""))
	page := must(t, http.StatusOK)(s.get(t, "/api/workflows/runs?workflowId="+wf+"&limit=1"))
	if got := runIDs(page["runs"]); !slices.Equal(got, []string{old["runId"].(string)}) || page["hasMore"] != true {
		t.Fatalf("first page of wf's runs: %v", page)
	}
	page = must(t, http.StatusOK)(s.get(t, "/api/workflows/runs?workflowId="+wf+"&limit=1&before="+page["nextBefore"].(string)))
	if got := runIDs(page["runs"]); !slices.Equal(got, []string{latest["runId"].(string)}) || page["hasMore"] != false {
		t.Errorf("second page of wf's runs: %v", page)
	}
	page = must(t, http.StatusOK)(s.get(t, "/api/workflows/runs?status=cancelled"))
	if got := runIDs(page["runs"]); !slices.Equal(got, []string{third["runId"].(string)}) {
		t.Errorf("cancelled runs: %v", page)
	}
	page = must(t, http.StatusOK)(s.get(t, "/api/workflows/runs", "X-User", "mallory"))
	if got := runIDs(page["runs"]); len(got) != 0 {
		t.Errorf("mallory sees runs %v", got)
	}
	wantError(t, "bad status", 400, runstream.CodeInvalidArgument)(s.get(t, "/api/workflows/runs?status=sleeping"))
	wantError(t, "cancel another user's run", 404, runstream.CodeWorkflowRunNotFound)(s.post(t, "/api/workflows/runs/"+old["runId"].(string)+"/cancel", "", "X-User", "mallory"))
}

// A queued run is cancelled at once.
func TestCancelQueuedRun(t *testing.T) {
	t.Parallel()
	s := newServer(t) // no engine
	run := s.startRun(t, s.publish(t, simpleFlow), `{"n":1}`)
	body := must(t, http.StatusAccepted)(s.post(t, "/api/workflows/runs/"+run+"/cancel", ""))
	if body["status"] != "cancelled" || body["finishedAt"] == nil {
		t.Errorf("cancelled queued run: %v", body)
	}
	enginetest.CheckSequence(t, s.follow(t, run).Rest(t), "run.created", "run.queued", "run.cancel_requested", "run.cancelled")
	wantError(t, "cancel again", 409, runstream.CodeWorkflowRunAlreadyTerminal)(s.post(t, "/api/workflows/runs/"+run+"/cancel", ""))
}

// Without an event log the endpoints that write runs answer UNAVAILABLE.
func TestWorkflowRunsNeedTheLog(t *testing.T) {
	t.Parallel()
	store := memory.NewWorkflowStore()
	api := httpapi.New(httpapi.Config{}, workflowsvc.New(store, nil, live.New(live.Config{}), workflowsvc.Config{}), nil)
	srv := apitest.Serve(t, api, api)
	s := &server{&servertest.Server{Store: store, URL: srv.URL}}
	wf := s.publish(t, simpleFlow)
	wantError(t, "start run", 503, runstream.CodeUnavailable)(s.post(t, "/api/workflows/"+wf+"/runs", `{"input":{"n":1}}`))
}
