package httpapi

import (
	"net/http"
	"strings"
	"testing"

	"github.com/runstream/runstream"
)

// TestNumbersOutOfRangeRefused: a number float64 cannot hold is refused
// at ingest, in every JSON body, with VALIDATION_FAILED naming its JSON
// path and not echoing its text.
func TestNumbersOutOfRangeRefused(t *testing.T) {
	env := newThreadEnv(t)
	tests := []struct {
		name, method, target, body, path string
	}{
		{"thread event content", "POST", "/api/threads/t1/runs/r1/events",
			`{"events":[{"event_type":"llm.ai.response","category":"message","content":{"usage":{"x":1e999}}}]}`, "/events/0/content/usage/x"},
		{"thread event metadata", "POST", "/api/threads/t1/runs/r1/events",
			`{"events":[{"event_type":"llm.ai.response","category":"message","content":{},"metadata":{"a/b":[0,-1E+400]}}]}`, "/events/0/metadata/a~1b/1"},
		{"workflow run input", "POST", "/api/workflows/wf_1/runs", `{"input":{"x":1e999}}`, "/input/x"},
		{"run row metadata", "PUT", "/api/threads/t1/runs/r1", `{"status":"running","metadata":{"n":123e99999}}`, "/metadata/n"},
		{"top level", "PUT", "/api/threads/t1/runs/r1/feedback", `1e999`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := env.do(t, tt.method, tt.target, tt.body)
			body := wantError(t, rec, http.StatusUnprocessableEntity, runstream.CodeValidationFailed)
			if !strings.HasPrefix(body.Message, tt.path+": number out of range") {
				t.Errorf("message %q does not name %q", body.Message, tt.path)
			}
			problems, _ := body.Details["problems"].([]any)
			if len(problems) != 1 || problems[0].(map[string]any)["path"] != tt.path {
				t.Errorf("details.problems = %v, want the path %q", body.Details["problems"], tt.path)
			}
			for _, echo := range []string{"e999", "E+400", "e99999"} {
				if strings.Contains(rec.Body.String(), echo) {
					t.Errorf("the error body echoes the number: %s", rec.Body)
				}
			}
		})
	}
	// Large, tiny and long numbers that float64 holds (or rounds) pass.
	ok := `{"events":[{"event_type":"run.start","content":{"chain":null,"a":1e308,"b":-1e-999,"c":123456789012345678901234567890},"metadata":{"caller":"lead_agent"}}]}`
	if rec := env.do(t, "POST", "/api/threads/t1/runs/r1/events", ok); rec.Code != http.StatusCreated {
		t.Errorf("numbers in range = %d %s, want 201", rec.Code, rec.Body)
	}
}
