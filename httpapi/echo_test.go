package httpapi

import (
	"strings"
	"testing"
)

// Secrets the default redaction rules recognise: what a caller might
// paste, by mistake, where an id or a value goes.
const (
	echoDSN = "postgres://admin:hunter2@db.internal:5432/prod"
	echoKey = "sk-proj-Ab12Cd34Ef56Gh78Ij90Kl12Mn34Op56"
)

// Through the thread API: a schema problem naming the caller's value and
// an event type that does not fit its category answer without the
// secrets, in the message, the details and FastAPI's detail.
func TestThreadErrorsDoNotEchoSecrets(t *testing.T) {
	t.Parallel()
	env := newThreadEnv(t)
	for _, body := range []string{
		`{"events":[{"event_type":"context:memory","content":{"content_sha256":"` + echoDSN + `"}}]}`,
		`{"events":[{"event_type":"middleware:` + echoKey + `","category":"message","content":{}}]}`,
	} {
		rec := env.do(t, "POST", "/api/threads/t1/runs/r1/events", body)
		if rec.Code != 422 {
			t.Errorf("POST %.60s…: %d %s, want 422", body, rec.Code, rec.Body)
		}
		if got := rec.Body.String(); strings.Contains(got, "hunter2") || strings.Contains(got, echoKey) {
			t.Errorf("the answer echoes the caller's secret: %s", got)
		}
	}
	if rec := env.do(t, "GET", "/api/threads/t1/runs/"+echoKey, ""); rec.Code != 404 || strings.Contains(rec.Body.String(), echoKey) {
		t.Errorf("GET a run named like a key: %d %s", rec.Code, rec.Body)
	}
}

// A body of the wrong shape is described in JSON's terms: the member's
// JSON pointer and the kinds of value, never Go's types or field names.
func TestWrongShapesAreDescribedInJSONTerms(t *testing.T) {
	t.Parallel()
	env := newThreadEnv(t)
	for _, c := range []struct{ method, target, body, want string }{
		{"POST", "/api/threads/t1/runs/r1/events", `[]`, "want a JSON object, not array"},
		{"PUT", "/api/threads/t1/runs/r2", `{"status":"running","total_tokens":"x"}`, `"/total_tokens"`},
		{"PUT", "/api/threads/t1/runs/r2/feedback", `[]`, "JSON object, not array"},
	} {
		rec := env.do(t, c.method, c.target, c.body)
		got := rec.Body.String()
		if rec.Code/100 != 4 || !strings.Contains(got, c.want) || strings.Contains(got, "struct") || strings.Contains(got, "RawMessage") || strings.Contains(got, "Usage") {
			t.Errorf("%s %s %s: %d %s; want a 4xx naming %s and no Go type", c.method, c.target, c.body, rec.Code, got, c.want)
		}
	}
}
