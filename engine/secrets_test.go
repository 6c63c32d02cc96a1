package engine_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/engine"
	"github.com/runstream/runstream/engine/enginetest"
	"github.com/runstream/runstream/memory"
	"github.com/runstream/runstream/workflow"
)

const plantedSecret = "sk-planted-0123456789abcdef"

// TestHTTPNodeSecretReferences: {{ secrets.NAME }} in a header and in the
// URL resolve from the server's environment when the node runs, and the
// resolved value appears in no stored event or output, even when the
// server echoes it.
func TestHTTPNodeSecretReferences(t *testing.T) {
	t.Parallel()
	var got atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sent := r.Header.Get("Authorization") + " " + r.URL.Query().Get("key")
		got.Store(sent)
		io.WriteString(w, "you sent "+sent)
	}))
	t.Cleanup(srv.Close)
	allow, err := engine.ParseHTTPAllowList("127.0.0.0/8")
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"RUNSTREAM_SECRET_API_TOKEN": plantedSecret}
	opts := engine.HTTPOptions{Allow: allow, Secrets: engine.EnvSecrets{Prefix: "RUNSTREAM_SECRET_", Getenv: func(k string) string { return env[k] }}}
	reg, err := engine.NewRegistry(engine.HTTP(opts), engine.Transform())
	if err != nil {
		t.Fatal(err)
	}
	e := enginetest.Start(t, memory.NewWorkflowStore(), reg, nil)
	run, events := e.Run(t, `{"name":"s","nodes":[{"id":"call","type":"http","config":{
		"url":"`+srv.URL+`/x?key={{ secrets.API_TOKEN }}","headers":{"Authorization":"Bearer {{ secrets.API_TOKEN }}"}}}],"output":"call"}`, `{}`)
	if run.Status != workflow.StatusCompleted {
		t.Fatalf("run %s: %s", run.Status, run.Error)
	}
	if want := "Bearer " + plantedSecret + " " + plantedSecret; got.Load() != want {
		t.Errorf("the server got %q, want %q", got.Load(), want)
	}
	if strings.Contains(string(run.Output), plantedSecret) || !strings.Contains(string(run.Output), "[REDACTED]") {
		t.Errorf("the output shows the secret or was not scrubbed: %s", run.Output)
	}
	for _, env := range events {
		if strings.Contains(string(env.Data), plantedSecret) {
			t.Errorf("%s holds the secret: %s", env.Event, env.Data)
		}
	}

	run, events = e.Run(t, `{"name":"s","nodes":[{"id":"call","type":"http","config":{
		"url":"`+srv.URL+`/x","headers":{"X-Api-Key":"{{ secrets.MISSING }}"}}}]}`, `{}`)
	if run.Status != workflow.StatusFailed || !strings.Contains(string(run.Error), "MISSING is not configured") {
		t.Errorf("a missing secret: run %s, error %s", run.Status, run.Error)
	}
	// Expressions cannot read secrets: they are not in the environment.
	if _, err := reg.CompileJSON([]byte(`{"name":"s","nodes":[{"id":"t","type":"transform","config":{"expression":"secrets.API_TOKEN"}}]}`)); err == nil {
		t.Errorf("a transform reading secrets compiled")
	}
}

// TestLiteralCredentialsAreRefused: a definition with a credential in
// clear in an http node's header or URL is refused at publish, naming
// the node and the header, never the value.
func TestLiteralCredentialsAreRefused(t *testing.T) {
	t.Parallel()
	reg := engine.DefaultRegistry()
	refused := []string{
		`{"url":"https://api.example.com/","headers":{"Authorization":"Bearer sk-live-abcdef123456"}}`,
		`{"url":"https://api.example.com/","headers":{"authorization":"sk-live-abcdef123456"}}`,
		`{"url":"https://api.example.com/","headers":{"X-Api-Key":"sk-live-abcdef123456"}}`,
		`{"url":"https://api.example.com/","headers":{"Cookie":"session=sk-live-abcdef123456"}}`,
		`{"url":"https://api.example.com/","headers":{"Proxy-Authorization":"Basic sk-live-abcdef123456"}}`,
		`{"url":"https://api.example.com/","headers":{"X-Auth-Token":"Bearer {{ secrets.T }}sk-live-abcdef123456"}}`,
		`{"url":"https://alice:sk-live-abcdef123456@api.example.com/"}`,
		`{"url":"https://{{ secrets.USER }}:sk-live-abcdef123456@api.example.com/"}`,
		`{"url":"https://api.example.com/x?api_key=sk-live-abcdef123456"}`,
		`{"url":"https://api.example.com/x?a=1&token=sk-live-abcdef123456#f"}`,
		// Written out inside an expression: a string literal is as clear.
		`{"url":"https://api.example.com/","headers":{"Authorization":"Bearer {{ \"sk-live-abcdef123456\" }}"}}`,
		`{"url":"https://api.example.com/","headers":{"Authorization":"{{ 'Bearer ' + 'sk-live-abcdef123456' }}"}}`,
		`{"url":"http://u:{{ \"sk-live-abcdef123456\" }}@api.example.com/"}`,
		`{"url":"https://api.example.com/x?api_key={{ \"sk-live-abcdef123456\" }}"}`,
		// An expression that reads no value renders what the definition
		// writes, however it is spelled.
		`{"url":"https://api.example.com/","headers":{"X-Api-Key":"{{ (\"sk-live-abcdef123456\") }}"}}`,
		`{"url":"https://api.example.com/","headers":{"X-Api-Key":"{{ trim(\"sk-live-abcdef123456\") }}"}}`,
		`{"url":"https://api.example.com/","headers":{"Authorization":"Bearer {{ true ? \"sk-live-abcdef123456\" : \"\" }}"}}`,
		`{"url":"https://api.example.com/x?api_key={{ lower(\"sk-live-abcdef123456\") }}"}`,
		`{"url":"https://api.example.com/","headers":{"X-Api-Key":"{{ \"sk-live-\\u0061bcdef123456\" }}"}}`,
		// A secret's shape under any header name, or anywhere in the URL.
		`{"url":"https://api.example.com/","headers":{"X-Foo":"Bearer ghp_` + strings.Repeat("a1B2", 9) + `"}}`,
		`{"url":"https://api.example.com/","headers":{"X-Foo":"{{ \"ghp_` + strings.Repeat("a1B2", 9) + `\" }}"}}`,
		`{"url":"https://api.example.com/ghp_` + strings.Repeat("a1B2", 9) + `/x"}`,
	}
	for _, config := range refused {
		_, err := reg.CompileJSON([]byte(`{"name":"c","nodes":[{"id":"call","type":"http","config":` + config + `}]}`))
		re := runstream.AsError(err)
		if re == nil || re.Code != runstream.CodeWorkflowDefinitionInvalid || re.NodeID != "call" || re.Details["rule"] != engine.RuleLiteralCredential {
			t.Errorf("%s: %v, want WORKFLOW_DEFINITION_INVALID %s on node call", config, err, engine.RuleLiteralCredential)
			continue
		}
		if strings.Contains(re.Message, "sk-live") || strings.Contains(re.Message, "a1B2") {
			t.Errorf("%s: the error shows the credential: %s", config, re.Message)
		}
	}
	// The error names the part of the URL, before the shape test's
	// "the url" can.
	for config, part := range map[string]string{
		`{"url":"https://alice:sk-live-abcdef123456@api.example.com/"}`:    "the url's password",
		`{"url":"https://api.example.com/x?api_key=sk-live-abcdef123456"}`: "the url's query parameter api_key",
	} {
		_, err := reg.CompileJSON([]byte(`{"name":"c","nodes":[{"id":"call","type":"http","config":` + config + `}]}`))
		if re := runstream.AsError(err); re == nil || !strings.Contains(re.Message, part) {
			t.Errorf("%s: %v, want it to name %s", config, err, part)
		}
	}
	allowed := []string{
		`{"url":"https://api.example.com/","headers":{"Authorization":"Bearer {{ secrets.API_TOKEN }}"}}`,
		`{"url":"https://api.example.com/","headers":{"Authorization":"{{ input.auth }}"}}`,
		`{"url":"https://api.example.com/","headers":{"X-Request-Id":"abc-123","Accept":"application/json"}}`,
		`{"url":"https://{{ secrets.USER }}:{{ secrets.PASS }}@api.example.com/"}`,
		`{"url":"https://alice@api.example.com/x?q=tea&page=2"}`,
		`{"url":"https://api.example.com/x?api_key={{ secrets.KEY }}"}`,
		`{"url":"https://api.example.com/{{ input.path ?? \"index\" }}","headers":{"X-Trace":"{{ input.id ?? \"none\" }}"}}`,
		// Literals in expressions that read values are no credential.
		`{"url":"https://api.example.com/","headers":{"X-Session-Id":"{{ input.session ?? \"anonymous\" }}"}}`,
		`{"url":"https://api.example.com/","headers":{"Authorization":"{{ input.env == \"prod\" ? input.a : input.b }}"}}`,
		`{"url":"https://api.example.com/","headers":{"Cookie":"{{ \"lang=\" + input.lang }}"}}`,
		`{"url":"https://api.example.com/x?token={{ input.page_token ?? \"start\" }}"}`,
		`{"url":"https://api.example.com/","headers":{"X-Custom":"password: {{ secrets.T }} mode"}}`,
	}
	for _, config := range allowed {
		if _, err := reg.CompileJSON([]byte(`{"name":"c","nodes":[{"id":"call","type":"http","config":` + config + `}]}`)); err != nil {
			t.Errorf("%s: %v, want allowed", config, err)
		}
	}
}

// TestCheckDefinitionCredentials: a definition holding a secret's shape
// in any string or member name is refused at its path, without the
// value; a definition that names credentials without holding one (a
// sensitive member name, a query's placeholder, prose) is not.
func TestCheckDefinitionCredentials(t *testing.T) {
	key := "ghp_" + strings.Repeat("a1B2", 9)
	dsn := "postgres://admin:S3cretPassQ9@db.internal:5432/prod"
	for def, path := range map[string]string{
		`{"description":"db ` + dsn + `"}`:                                                        "/description",
		`{"nodes":[{"config":{"expression":"\"` + dsn + `\""}}]}`:                                 "/nodes/0/config/expression",
		`{"nodes":[{"config":{"expression":"` + key + `"}}]}`:                                     "/nodes/0/config/expression",
		`{"nodes":[{"config":{"text":"the key is {{ \"` + key + `\" }}"}}]}`:                      "/nodes/0/config/text",
		`{"inputSchema":{"examples":[{"` + key + `":1}]}}`:                                        "/inputSchema/examples/0",
		`{"nodes":[{"config":{"headers":{"X-Foo":"Bearer ` + key + `"}}}]}`:                       "/nodes/0/config/headers/X-Foo",
		`{"nodes":[{"config":{"query":"SELECT 1 -- sk-proj-Ab12Cd34Ef56Gh78Ij90Kl12Mn34Op56"}}]}`: "/nodes/0/config/query",
	} {
		err := engine.CheckDefinitionCredentials(json.RawMessage(def))
		re := runstream.AsError(err)
		if re == nil || re.Code != runstream.CodeWorkflowDefinitionInvalid || re.Details["rule"] != engine.RuleLiteralCredential || re.Details["path"] != path {
			t.Errorf("%s: %v, want literal_credential at %s", def, err, path)
			continue
		}
		if strings.Contains(re.Message, "a1B2") || strings.Contains(re.Message, "S3cret") {
			t.Errorf("%s: the error shows the credential: %s", def, re.Message)
		}
	}
	for _, def := range []string{
		`{"nodes":[{"config":{"expression":"{\"token\": input.token, \"password\": input.password}"}}]}`,
		`{"nodes":[{"config":{"expression":"{\"session_token\": nodes.login.output.body.token}"}}]}`,
		`{"nodes":[{"config":{"query":"SELECT id FROM users WHERE password = ? AND api_key=$1"}}]}`,
		`{"nodes":[{"config":{"text":"password=at least 12 characters; the token: see the docs"}}]}`,
		`{"nodes":[{"config":{"headers":{"Authorization":"Bearer {{ secrets.API_TOKEN }}"}}}]}`,
		`{"nodes":[{"config":{"url":"postgres://{{ secrets.USER }}@db.internal/prod"}}]}`,
	} {
		if err := engine.CheckDefinitionCredentials(json.RawMessage(def)); err != nil {
			t.Errorf("%s: %v, want it accepted", def, err)
		}
	}
}
