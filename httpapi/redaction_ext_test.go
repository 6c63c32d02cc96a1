package httpapi_test

import (
	"encoding/json"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"

	"github.com/runstream/runstream/redact/redacttest"
)

// TestWorkflowRunInputRedacted starts a run whose input holds every
// secret of the redaction corpus: the run as GET answers it, its list row
// and its events hold none.
func TestWorkflowRunInputRedacted(t *testing.T) {
	s := newServer(t)
	wf := s.publish(t, `{"definition":`+simpleFlow+`}`)
	secrets := redacttest.Secrets(rand.New(rand.NewPCG(3, 13)))
	texts := map[string]string{}
	for _, sc := range secrets {
		texts[sc.Kind] = sc.Text
	}
	input, _ := json.Marshal(map[string]any{"n": 1, "secrets": texts, "password": "hunter2hunter2"})
	runID := s.startRun(t, wf, string(input))
	check := func(what string, body any) {
		t.Helper()
		raw, _ := json.Marshal(body)
		text := string(raw)
		if strings.Contains(text, "hunter2hunter2") {
			t.Errorf("%s holds the password: %s", what, text)
		}
		for _, sc := range secrets {
			for _, p := range sc.Parts {
				// JSON escapes some characters of PEM and URL parts.
				quoted, _ := json.Marshal(p)
				if strings.Contains(text, p) || strings.Contains(text, strings.Trim(string(quoted), `"`)) {
					t.Errorf("%s holds %s's %q", what, sc.Kind, p)
				}
			}
		}
	}
	check("GET run", must(t, http.StatusOK)(s.get(t, "/api/workflows/runs/"+runID)))
	check("GET runs", must(t, http.StatusOK)(s.get(t, "/api/workflows/runs?workflowId="+wf)))
	check("GET events", must(t, http.StatusOK)(s.get(t, "/api/workflows/runs/"+runID+"/events")))
}
