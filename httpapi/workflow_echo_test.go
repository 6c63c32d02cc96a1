package httpapi_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// The workflow API answers an id or a cursor that is a pasted secret, or
// is huge, without giving it back beyond a short redacted excerpt.
func TestWorkflowErrorsDoNotEchoTheCaller(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	const dsn = "postgres://admin:hunter2@db.internal:5432/prod"
	const key = "sk-proj-Ab12Cd34Ef56Gh78Ij90Kl12Mn34Op56"
	long := strings.Repeat("w", 60000)
	words := url.PathEscape(strings.Repeat("word ", 1000)) // short runs, no run over the cut
	for _, c := range []struct {
		path   string
		status int
	}{
		{"/api/workflows/" + url.PathEscape(dsn), 404},
		{"/api/workflows/" + long, 404},
		{"/api/workflows/" + words, 404},
		{"/api/workflows/runs/" + words, 404},
		{"/api/workflows/runs/" + url.PathEscape(dsn), 404},
		{"/api/workflows?before=" + key, 400},
		{"/api/workflows/runs?before=" + url.QueryEscape(dsn), 400},
	} {
		status, body := s.call(t, "GET", c.path, "", "")
		raw, _ := json.Marshal(body)
		if status != c.status || strings.Contains(string(raw), "hunter2") || strings.Contains(string(raw), key) || len(raw) > 1000 {
			t.Errorf("GET %.80s: %d %.300s; want %d without the caller's value", c.path, status, raw, c.status)
		}
	}
}

// A request body of the wrong shape on the workflow API is described in
// JSON's terms, never with Go's types.
func TestWorkflowWrongShapesNameNoGoType(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	for _, c := range []struct{ path, body string }{
		{"/api/workflows/wf_x/runs", `[]`},
		{"/api/workflows", `{"name":"x","nodes":"y"}`},
	} {
		status, body := s.call(t, "POST", c.path, "application/json", c.body)
		raw, _ := json.Marshal(body)
		if status/100 != 4 || strings.Contains(string(raw), "struct") || strings.Contains(string(raw), "engine.") || strings.Contains(string(raw), "RawMessage") {
			t.Errorf("POST %s %s: %d %s; want a 4xx naming no Go type", c.path, c.body, status, raw)
		}
	}
	// null is no more an object than [] or "x" is, on any route whose
	// body is one.
	for _, path := range []string{"/api/workflows", "/api/workflows/wf_x/runs", "/api/workflows/runs/run_x/resume"} {
		for _, body := range []string{`null`, ` null `, `[]`, `"x"`} {
			if status, resp := s.call(t, "POST", path, "application/json", body); status != 400 || resp["code"] != "INVALID_ARGUMENT" {
				t.Errorf("POST %s %s: %d %v, want 400 INVALID_ARGUMENT", path, body, status, resp)
			}
		}
	}
}

// A path out of canonical form answers 404 in the unified body, not the
// mux's redirect, whose Location would give the path back.
func TestUncleanPathIsNotRedirected(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	for _, p := range []string{"//api/workflows/postgres:%2F%2Fadmin:hunter2@db%2Fx", "/api/./workflows", "/api/workflows/../contracts"} {
		req, err := http.NewRequestWithContext(t.Context(), "GET", s.URL+p, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.URL.Opaque = p // sent as it is, not cleaned by the client
		resp, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 404 || resp.Header.Get("Location") != "" || strings.Contains(string(body), "hunter2") || !strings.Contains(string(body), `"NOT_FOUND"`) {
			t.Errorf("GET %s: %d, Location %q, %s", p, resp.StatusCode, resp.Header.Get("Location"), body)
		}
	}
}
