package httpapi

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/redact/redacttest"
	"github.com/runstream/runstream/runevents"
)

// testDSNPassword is the password of testDSN, which no error body, log
// line or stored row may hold.
const (
	testDSNPassword = "S3cretPw0rd99"
	testDSN         = "postgres://alice:" + testDSNPassword + "@db.example:5432/app"
)

// corpus returns the redaction corpus's secrets that fit on one line.
func corpus(seed uint64) []redacttest.Secret {
	var out []redacttest.Secret
	for _, s := range redacttest.Secrets(rand.New(rand.NewPCG(seed, 13))) {
		if !strings.Contains(s.Text, "\n") {
			out = append(out, s)
		}
	}
	return out
}

// holdsSecret returns the first part of a secret found in text.
func holdsSecret(text string, secrets []redacttest.Secret) (string, bool) {
	for _, s := range secrets {
		for _, p := range s.Parts {
			if strings.Contains(text, p) {
				return p, true
			}
		}
	}
	return "", false
}

// TestErrorBodiesNameNoSecret sends requests whose error bodies would
// echo a caller's value: each names the member or the path, with at most
// a short redacted excerpt of it.
func TestErrorBodiesNameNoSecret(t *testing.T) {
	env := newThreadEnv(t)
	long := strings.Repeat("x", 500)
	tests := []struct {
		name, method, target, body string
		status                     int
	}{
		{"unknown event member", "POST", "/api/threads/t1/runs/r1/events", `{"events":[{"event_type":"llm.ai.response","category":"message","content":{},"` + testDSN + `":1}]}`, 422},
		{"unknown body member", "POST", "/api/threads/t1/runs/r1/events", `{"events":[],"` + testDSN + `":1}`, 422},
		{"unknown run member", "PUT", "/api/threads/t1/runs/r1", `{"status":"running","` + testDSN + `":1}`, 422},
		{"unknown feedback member", "PUT", "/api/threads/t1/runs/r1/feedback", `{"rating":1,"` + testDSN + `":1}`, 422},
		{"duplicate key", "POST", "/api/threads/t1/runs/r1/events", `{"events":[{"` + testDSN + `":1,"` + testDSN + `":2}]}`, 400},
		{"unknown event type", "POST", "/api/threads/t1/runs/r1/events", `{"events":[{"event_type":"` + testDSN + `","category":"message","content":{}}]}`, 422},
		{"no route", "GET", "/api/nothing/" + url.PathEscape(testDSN), "", 404},
		{"wrong method", "PATCH", "/api/threads/t1/runs/" + url.PathEscape(testDSN), "", 405},
		{"run status", "PUT", "/api/threads/t1/runs/r1", `{"status":"` + testDSN + `"}`, 422},
		{"long unknown member", "PUT", "/api/threads/t1/runs/r1", `{"status":"running","` + long + `":1}`, 422},
		{"unknown workflow member", "POST", "/api/workflows", `{"definition":{},"` + testDSN + `":1}`, 400},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := env.do(t, tt.method, tt.target, tt.body)
			if rec.Code != tt.status {
				t.Errorf("status %d, want %d: %s", rec.Code, tt.status, rec.Body)
			}
			body := rec.Body.String()
			if strings.Contains(body, testDSNPassword) || strings.Contains(body, "alice:") {
				t.Errorf("the error body echoes the caller's secret: %s", body)
			}
			if strings.Contains(body, long[:runeExcerpt+8]) {
				t.Errorf("the error body echoes more than a short excerpt: %s", body)
			}
		})
	}
}

// runeExcerpt is redact.ExcerptRunes, the longest excerpt of a value.
const runeExcerpt = 32

// TestAccessLogRedactsPathAndQuery sends secrets in the path (a DSN as a
// thread id) and the query: the access log line holds neither.
func TestAccessLogRedactsPathAndQuery(t *testing.T) {
	var logs bytes.Buffer
	env := newThreadEnv(t, func(c *envConfig) { c.Logger = slog.New(slog.NewJSONHandler(&logs, nil)) })
	secrets := corpus(1)
	env.do(t, "GET", "/api/threads/"+url.PathEscape(testDSN)+"/runs?token=abcdefgh12345678&dsn="+url.QueryEscape(testDSN), "")
	env.do(t, "GET", "/api/threads/t1/messages/page?limit=5&signature=f00dcafe0123456789&limit=6", "")
	for _, s := range secrets {
		env.do(t, "GET", "/api/threads/t1/runs/"+url.PathEscape(s.Text)+"/messages?q="+url.QueryEscape(s.Text), "")
		env.do(t, "GET", "/api/"+url.PathEscape(s.Text), "")
	}
	out := logs.String()
	if !strings.Contains(out, `"msg":"request"`) {
		t.Fatalf("no access log lines:\n%s", out)
	}
	for _, bad := range []string{testDSNPassword, "abcdefgh12345678", "f00dcafe0123456789"} {
		if strings.Contains(out, bad) {
			t.Errorf("the access log holds %q:\n%s", bad, out)
		}
	}
	// The query's parameter names are kept, each once, never a value.
	if !strings.Contains(out, `"query":"limit,signature"`) {
		t.Errorf("the access log does not name the query's parameters:\n%s", out)
	}
	if p, ok := holdsSecret(out, secrets); ok {
		t.Errorf("the access log holds %q", p)
	}
}

// TestRunRowsAndFeedbackRedacted stores run rows and feedback holding
// secrets through the API: the store and the responses keep them
// redacted.
func TestRunRowsAndFeedbackRedacted(t *testing.T) {
	forEachThreadBackend(t, func(t *testing.T, b threadBackend) {
		env := newThreadEnvOn(t, b)
		secrets := corpus(2)
		notes := make([]string, len(secrets))
		for i, s := range secrets {
			notes[i] = s.Text
		}
		meta, _ := json.Marshal(map[string]any{"notes": notes, "api_key": "k-" + secrets[0].Text, "dsn": testDSN})
		for i, s := range secrets {
			run := "r" + string(rune('a'+i%26)) + strings.Repeat("x", i/26)
			label := s.Text // model_name and operation_kind have at most 128 characters
			if len(label) > 128 {
				label = "x"
			}
			body, _ := json.Marshal(map[string]any{"status": "success", "model_name": label, "operation_kind": label, "metadata": json.RawMessage(meta),
				"token_usage_by_model": map[string]any{s.Text: map[string]int{"input_tokens": 1, "output_tokens": 2, "total_tokens": 3}}})
			rec := env.do(t, "PUT", "/api/threads/t1/runs/"+run, string(body))
			if rec.Code != http.StatusOK {
				t.Fatalf("PUT run (%s) = %d %s", s.Kind, rec.Code, rec.Body)
			}
			if p, ok := holdsSecret(rec.Body.String(), secrets); ok {
				t.Errorf("PUT run (%s) answers %q", s.Kind, p)
			}
			fb, _ := json.Marshal(map[string]any{"rating": 1, "comment": "see\n" + s.Text + "\nand " + testDSN})
			rec = env.do(t, "PUT", "/api/threads/t1/runs/"+run+"/feedback", string(fb))
			if rec.Code != http.StatusOK {
				t.Fatalf("PUT feedback (%s) = %d %s", s.Kind, rec.Code, rec.Body)
			}
			if p, ok := holdsSecret(rec.Body.String(), secrets); ok || strings.Contains(rec.Body.String(), testDSNPassword) {
				t.Errorf("PUT feedback (%s) answers %q: %s", s.Kind, p, rec.Body)
			}
			if len(s.Text) <= 256 { // a message id's bound
				fb, _ = json.Marshal(map[string]any{"rating": -1, "message_id": s.Text})
				rec = env.do(t, "POST", "/api/threads/t1/runs/"+run+"/feedback", string(fb))
				if rec.Code/100 != 2 {
					t.Fatalf("POST feedback with a message id (%s) = %d %s", s.Kind, rec.Code, rec.Body)
				}
				if p, ok := holdsSecret(rec.Body.String(), secrets); ok {
					t.Errorf("POST feedback with a message id (%s) answers %q: %s", s.Kind, p, rec.Body)
				}
				stored, err := env.runs.ListRunFeedback(t.Context(), "t1", run, runevents.OwnedBy("alice"))
				if err != nil {
					t.Fatal(err)
				}
				for _, f := range stored {
					if p, ok := holdsSecret(f.MessageID, secrets); ok {
						t.Errorf("stored feedback message id (%s) holds %q", s.Kind, p)
					}
				}
			}
		}
		runs, err := env.runs.ListRuns(t.Context(), "t1", runevents.OwnedBy("alice"))
		if err != nil || len(runs) != len(secrets) {
			t.Fatalf("ListRuns = %d rows, %v", len(runs), err)
		}
		var ids []string
		for _, r := range runs {
			ids = append(ids, r.RunID)
			stored, _ := json.Marshal(r)
			text := string(stored) + r.ModelName + r.OperationKind + string(r.Metadata)
			if p, ok := holdsSecret(text, secrets); ok || strings.Contains(text, testDSNPassword) {
				t.Errorf("stored run row %s holds %q: %s", r.RunID, p, text)
			}
		}
		feedback, err := env.runs.ListFeedback(t.Context(), "t1", ids, runevents.OwnedBy("alice"))
		if err != nil || len(feedback) != len(secrets) {
			t.Fatalf("ListFeedback = %d, %v", len(feedback), err)
		}
		for _, f := range feedback {
			text := f.Comment + string(f.Rating)
			if p, ok := holdsSecret(text, secrets); ok || strings.Contains(text, testDSNPassword) {
				t.Errorf("stored feedback %s holds %q: %s", f.RunID, p, text)
			}
		}
		rec := env.get(t, "/api/threads/t1/runs", "")
		if p, ok := holdsSecret(rec.Body.String(), secrets); ok {
			t.Errorf("GET runs answers %q", p)
		}
	})
}

// TestRunMetadataBound refuses run-row metadata past 256 KiB with
// VALIDATION_FAILED naming the member.
func TestRunMetadataBound(t *testing.T) {
	env := newThreadEnv(t)
	big := `{"status":"running","metadata":{"blob":"` + strings.Repeat("a", 256<<10) + `"}}`
	body := wantError(t, env.do(t, "PUT", "/api/threads/t1/runs/r1", big), http.StatusUnprocessableEntity, runstream.CodeValidationFailed)
	if !strings.Contains(body.Message, "/metadata") {
		t.Errorf("message %q does not name /metadata", body.Message)
	}
	fits := `{"status":"running","metadata":{"blob":"` + strings.Repeat("a", 200<<10) + `"}}`
	if rec := env.do(t, "PUT", "/api/threads/t1/runs/r1", fits); rec.Code != http.StatusOK {
		t.Errorf("200 KiB of metadata = %d %s, want 200", rec.Code, rec.Body)
	}
}
