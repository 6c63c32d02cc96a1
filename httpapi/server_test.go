package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/health"
)

type testServer struct {
	*Server
	logs *bytes.Buffer
}

func setup(t *testing.T, mutate ...func(*Config)) testServer {
	t.Helper()
	logs := &bytes.Buffer{}
	cfg := Config{
		Logger: slog.New(slog.NewJSONHandler(logs, nil)),
		Contracts: fstest.MapFS{
			"errors.json":  {Data: []byte(`{"codes":[]}`)},
			"private.json": {Data: []byte(`{"secret":true}`)},
		},
		ContractNames: []string{"errors.json"},
		Store:         "memory",
		Durability:    "memory: none",
		Version:       "test",
		MaxBodyBytes:  64,
	}
	for _, m := range mutate {
		m(&cfg)
	}
	return testServer{Server: New(cfg, nil, nil), logs: logs}
}

func (s testServer) do(t *testing.T, method, target string, body io.Reader, header ...string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(method, target, body)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, req)
	return rec
}

func decodeError(t *testing.T, rec *httptest.ResponseRecorder) errorBody {
	t.Helper()
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Fatalf("Content-Type = %q, want application/json", ct)
	}
	var body errorBody
	dec := json.NewDecoder(rec.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil {
		t.Fatalf("decode error body: %v", err)
	}
	if body.RequestID == "" || body.RequestID != rec.Header().Get(RequestIDHeader) {
		t.Errorf("requestId %q does not match header %q", body.RequestID, rec.Header().Get(RequestIDHeader))
	}
	return body
}

func TestOperationalEndpoints(t *testing.T) {
	t.Parallel()
	s := setup(t)
	rec := s.do(t, "GET", "/healthz", nil)
	if rec.Code != 200 || !strings.Contains(rec.Body.String(), `"status":"ok"`) {
		t.Errorf("/healthz = %d %s", rec.Code, rec.Body)
	}
	rec = s.do(t, "GET", "/readyz", nil)
	if rec.Code != 200 || !strings.Contains(rec.Body.String(), `"durability":"memory: none"`) {
		t.Errorf("/readyz = %d %s", rec.Code, rec.Body)
	}
	rec = s.do(t, "GET", "/api/contracts/errors.json", nil)
	if rec.Code != 200 || rec.Body.String() != `{"codes":[]}` || rec.Header().Get("Content-Type") != "application/json" {
		t.Errorf("contract = %d %q %q", rec.Code, rec.Header().Get("Content-Type"), rec.Body)
	}
	rec = s.do(t, "GET", "/api/contracts", nil)
	if rec.Code != 200 || !strings.Contains(rec.Body.String(), `"errors.json"`) {
		t.Errorf("contract list = %d %s", rec.Code, rec.Body)
	}
	rec = s.do(t, "GET", "/metrics", nil)
	if rec.Code != 200 || !strings.Contains(rec.Body.String(), `runstream_http_requests_total{code="200",method="GET",route="GET /healthz"} 1`) {
		t.Errorf("/metrics lacks the request counter of /healthz:\n%s", rec.Body)
	}
}

func TestErrorsUseTheUnifiedBody(t *testing.T) {
	t.Parallel()
	s := setup(t)
	for _, tc := range []struct {
		name, method, target string
		status               int
		code                 runstream.ErrorCode
	}{
		{"unknown route", "GET", "/nope", 404, runstream.CodeNotFound},
		{"contract not listed", "GET", "/api/contracts/private.json", 404, runstream.CodeNotFound},
		{"contract path escape", "GET", "/api/contracts/..%2Fgo.mod", 404, runstream.CodeNotFound},
		{"wrong method", "DELETE", "/healthz", 405, runstream.CodeMethodNotAllowed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := s.do(t, tc.method, tc.target, nil)
			if rec.Code != tc.status {
				t.Fatalf("status = %d, want %d (%s)", rec.Code, tc.status, rec.Body)
			}
			body := decodeError(t, rec)
			if body.Code != tc.code || body.Message == "" || body.Retryable != tc.code.Retryable() {
				t.Errorf("body = %+v, want code %s", body, tc.code)
			}
		})
	}
	if rec := s.do(t, "DELETE", "/healthz", nil); !strings.Contains(rec.Header().Get("Allow"), "GET") {
		t.Errorf("405 without Allow header: %v", rec.Header())
	}
}

func TestInternalErrorsDoNotLeak(t *testing.T) {
	t.Parallel()
	const secret = "postgres://admin:hunter2@db.internal:5432/prod"
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"plain error", errors.New("dial " + secret + ": connection refused")},
		{"wrapped internal", runstream.Wrap(errors.New(secret), runstream.CodeInternal, "load run")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := setup(t)
			s.handle("GET /boom", func(w http.ResponseWriter, r *http.Request) error { return tc.err })
			rec := s.do(t, "GET", "/boom", nil)
			if rec.Code != 500 {
				t.Fatalf("status = %d", rec.Code)
			}
			if strings.Contains(rec.Body.String(), "hunter2") || strings.Contains(rec.Body.String(), "db.internal") {
				t.Errorf("body leaks the cause: %s", rec.Body)
			}
			body := decodeError(t, rec)
			if body.Code != runstream.CodeInternal || body.Message != "internal error" {
				t.Errorf("body = %+v", body)
			}
			if !strings.Contains(s.logs.String(), body.RequestID) || !strings.Contains(s.logs.String(), "connection refused") && tc.name == "plain error" {
				t.Errorf("the log lacks the request id or the cause:\n%s", s.logs)
			}
		})
	}
}

func TestReadyzAnswersUnavailableWithoutTheCause(t *testing.T) {
	t.Parallel()
	s := setup(t, func(c *Config) {
		c.Ready = func(context.Context) (map[string]health.Status, error) {
			return nil, errors.New("dial tcp 10.0.0.7:5432: password authentication failed")
		}
	})
	rec := s.do(t, "GET", "/readyz", nil)
	if rec.Code != 503 {
		t.Fatalf("status = %d", rec.Code)
	}
	body := decodeError(t, rec)
	if body.Code != runstream.CodeUnavailable || !body.Retryable || strings.Contains(body.Message, "10.0.0.7") {
		t.Errorf("body = %+v", body)
	}
}

// TestReadyzNamesTheFailingPart checks that /readyz answers 503 with the
// unified error body naming the part that is not ready, the statuses of
// every part in details.parts, and 200 with the parts when all are ready.
func TestReadyzNamesTheFailingPart(t *testing.T) {
	t.Parallel()
	listenerUp := false
	s := setup(t, func(c *Config) {
		c.Ready = func(ctx context.Context) (map[string]health.Status, error) {
			return health.Check(ctx, []health.Part{
				{Name: "store", Check: func(context.Context) error { return nil }},
				{Name: "listener", Check: func(context.Context) error {
					if listenerUp {
						return nil
					}
					return runstream.Errorf(runstream.CodeUnavailable, "the PostgreSQL listener is not connected")
				}},
			})
		}
	})
	rec := s.do(t, "GET", "/readyz", nil)
	if rec.Code != 503 {
		t.Fatalf("status = %d %s", rec.Code, rec.Body)
	}
	body := decodeError(t, rec)
	if body.Code != runstream.CodeUnavailable || !strings.Contains(body.Message, "listener: the PostgreSQL listener is not connected") || strings.Contains(body.Message, "store") {
		t.Errorf("message = %q", body.Message)
	}
	parts, _ := body.Details["parts"].(map[string]any)
	store, _ := parts["store"].(map[string]any)
	listener, _ := parts["listener"].(map[string]any)
	if store["status"] != "ready" || listener["status"] != "unavailable" {
		t.Errorf("details.parts = %v", body.Details["parts"])
	}
	listenerUp = true
	rec = s.do(t, "GET", "/readyz", nil)
	if rec.Code != 200 || !strings.Contains(rec.Body.String(), `"parts":{"listener":{"status":"ready"},"store":{"status":"ready"}}`) {
		t.Errorf("/readyz = %d %s", rec.Code, rec.Body)
	}
}

func TestPanicAnswersInternal(t *testing.T) {
	t.Parallel()
	s := setup(t)
	s.handle("GET /panic", func(w http.ResponseWriter, r *http.Request) error { panic("kaboom secret") })
	rec := s.do(t, "GET", "/panic", nil)
	if rec.Code != 500 {
		t.Fatalf("status = %d", rec.Code)
	}
	if body := decodeError(t, rec); body.Code != runstream.CodeInternal || strings.Contains(rec.Body.String(), "kaboom") {
		t.Errorf("body = %s", rec.Body)
	}
	if !strings.Contains(s.logs.String(), "kaboom") {
		t.Errorf("panic not logged:\n%s", s.logs)
	}
}

func TestRequestID(t *testing.T) {
	t.Parallel()
	s := setup(t)
	rec := s.do(t, "GET", "/healthz", nil, RequestIDHeader, "abc-123")
	if got := rec.Header().Get(RequestIDHeader); got != "abc-123" {
		t.Errorf("a valid incoming id is replaced: %q", got)
	}
	rec = s.do(t, "GET", "/healthz", nil, RequestIDHeader, "bad id\twith spaces")
	if got := rec.Header().Get(RequestIDHeader); got == "" || strings.ContainsAny(got, " \t") {
		t.Errorf("an invalid incoming id is kept: %q", got)
	}
	var line map[string]any
	logs := strings.Split(strings.TrimSpace(s.logs.String()), "\n")
	if err := json.Unmarshal([]byte(logs[0]), &line); err != nil {
		t.Fatalf("access log is not JSON: %v", err)
	}
	for _, key := range []string{"request_id", "method", "path", "route", "status", "duration"} {
		if _, ok := line[key]; !ok {
			t.Errorf("access log lacks %q: %v", key, line)
		}
	}
}

// TestRequestIDShapedLikeASecret: an incoming id that the redaction takes
// for a secret is neither echoed nor logged.
func TestRequestIDShapedLikeASecret(t *testing.T) {
	t.Parallel()
	s := setup(t)
	const key = "sk-proj-Ab12Cd34Ef56Gh78Ij90Kl12Mn34Op56"
	rec := s.do(t, "GET", "/healthz", nil, RequestIDHeader, key)
	if got := rec.Header().Get(RequestIDHeader); got == key || got == "" {
		t.Errorf("the id answered is %q", got)
	}
	if strings.Contains(s.logs.String(), key) {
		t.Errorf("the log holds the id:\n%s", s.logs)
	}
}

// TestAbortedRequestIsLogged: a handler that ends its request by
// http.ErrAbortHandler (a stream cut on purpose) is logged as aborted.
func TestAbortedRequestIsLogged(t *testing.T) {
	t.Parallel()
	s := setup(t)
	s.handle("GET /cut", func(w http.ResponseWriter, r *http.Request) error {
		w.Write([]byte("partial"))
		panic(http.ErrAbortHandler)
	})
	func() {
		defer func() {
			if p := recover(); p != http.ErrAbortHandler {
				t.Errorf("recovered %v, want http.ErrAbortHandler passed on", p)
			}
		}()
		s.do(t, "GET", "/cut", nil, RequestIDHeader, "cut-1")
	}()
	var line map[string]any
	for _, l := range strings.Split(strings.TrimSpace(s.logs.String()), "\n") {
		if strings.Contains(l, `"request_id":"cut-1"`) {
			json.Unmarshal([]byte(l), &line)
		}
	}
	if line["msg"] != "request" || line["aborted"] != true || line["bytes"] != float64(len("partial")) {
		t.Errorf("the access log line of the aborted request: %v\n%s", line, s.logs)
	}
}

func TestReadJSONBody(t *testing.T) {
	t.Parallel()
	s := setup(t)
	s.handle("POST /echo", func(w http.ResponseWriter, r *http.Request) error {
		body, err := readJSONBody(r)
		if err != nil {
			return err
		}
		w.Write(body)
		return nil
	})
	for _, tc := range []struct {
		name, contentType, body string
		status                  int
		code                    runstream.ErrorCode
	}{
		{"ok", "application/json", `{"a":[1,2]}`, 200, ""},
		{"ok with charset", "application/json; charset=utf-8", `{}`, 200, ""},
		{"no content type", "", `{}`, 415, runstream.CodeUnsupportedMediaType},
		{"wrong content type", "text/plain", `{}`, 415, runstream.CodeUnsupportedMediaType},
		{"too large", "application/json", `{"a":"` + strings.Repeat("x", 100) + `"}`, 413, runstream.CodePayloadTooLarge},
		{"syntax", "application/json", `{"a":}`, 400, runstream.CodeInvalidJSON},
		{"duplicate key", "application/json", `{"a":1,"a":2}`, 400, runstream.CodeInvalidJSON},
		{"nested duplicate key", "application/json", `{"a":{"b":1,"b":1}}`, 400, runstream.CodeInvalidJSON},
		{"trailing data", "application/json", `{} {}`, 400, runstream.CodeInvalidJSON},
		{"invalid utf-8", "application/json", "{\"a\":\"\xff\"}", 400, runstream.CodeInvalidJSON},
		{"empty", "application/json", ``, 400, runstream.CodeInvalidJSON},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := s.do(t, "POST", "/echo", strings.NewReader(tc.body), "Content-Type", tc.contentType)
			if rec.Code != tc.status {
				t.Fatalf("status = %d, want %d: %s", rec.Code, tc.status, rec.Body)
			}
			if tc.code != "" {
				if body := decodeError(t, rec); body.Code != tc.code {
					t.Errorf("code = %s, want %s", body.Code, tc.code)
				}
			} else if rec.Body.String() != tc.body {
				t.Errorf("body = %q", rec.Body)
			}
		})
	}
}

func TestCheckJSONDepth(t *testing.T) {
	t.Parallel()
	ok := strings.Repeat("[", MaxJSONDepth) + strings.Repeat("]", MaxJSONDepth)
	if err := CheckJSON([]byte(ok)); err != nil {
		t.Errorf("depth %d refused: %v", MaxJSONDepth, err)
	}
	deep := strings.Repeat("[", MaxJSONDepth+1) + strings.Repeat("]", MaxJSONDepth+1)
	if err := CheckJSON([]byte(deep)); runstream.ErrorCodeOf(err) != runstream.CodeInvalidJSON {
		t.Errorf("depth %d: err = %v", MaxJSONDepth+1, err)
	}
}

func TestCheckJSONSurrogates(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{
		`"\ud83d\ude00"`, `{"\ud83d\ude00":"\u00e9\\ud800"}`, `["\\\ud83d\ude00", "\"\uFFFF"]`, `"\\u"`, `{"a":"\ud83D\uDE00"}`,
	} {
		if err := CheckJSON([]byte(ok)); err != nil {
			t.Errorf("%s refused: %v", ok, err)
		}
	}
	for _, bad := range []string{
		`"\ud800"`, `"\udc00"`, `{"\udc00":1}`, `"\ud800x"`, `"\ud800\u0041"`, `["\\", "\ud83d"]`, `"\ude00\ud83d"`, `"\ud800\ud800"`,
	} {
		if err := CheckJSON([]byte(bad)); runstream.ErrorCodeOf(err) != runstream.CodeInvalidJSON {
			t.Errorf("%s: err = %v, want INVALID_JSON", bad, err)
		}
	}
}

func FuzzCheckJSON(f *testing.F) {
	for _, seed := range []string{`{}`, `{"a":[1,{"b":null}]}`, `{"a":1,"a":2}`, `[`, "\xff", `"x"`, `"\ud800"`, `"\ud83d\ude00"`} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		err := CheckJSON(b)
		if err == nil && !json.Valid(b) {
			t.Fatalf("CheckJSON accepted invalid JSON %q", b)
		}
		if err != nil && runstream.ErrorCodeOf(err) != runstream.CodeInvalidJSON {
			t.Fatalf("unexpected code %v", err)
		}
		// What CheckJSON accepts decodes without U+FFFD standing in for a
		// lone surrogate: every string re-encodes to valid UTF-16 pairs.
		if err == nil && bytes.Contains(b, []byte(`\u`)) {
			var v any
			if json.Unmarshal(b, &v) == nil && strings.Contains(fmt.Sprint(v), "\uFFFD") && !bytes.Contains(b, []byte("\uFFFD")) && !bytes.Contains(bytes.ToLower(b), []byte(`\ufffd`)) {
				t.Fatalf("CheckJSON accepted %q, which decodes with U+FFFD", b)
			}
		}
	})
}
