package tracing_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/runstream/runstream/tracing"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// record installs a global SDK provider whose spans the test reads, and
// the W3C propagator, until the test ends. Tests that call it are not
// parallel: the provider is global.
func record(t *testing.T) *tracetest.SpanRecorder {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	prevTP, prevProp := otel.GetTracerProvider(), otel.GetTextMapPropagator()
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.TraceContext{})
	t.Cleanup(func() {
		otel.SetTracerProvider(prevTP)
		otel.SetTextMapPropagator(prevProp)
		tp.Shutdown(context.Background())
	})
	return rec
}

func attrs(s sdktrace.ReadOnlySpan) map[attribute.Key]attribute.Value {
	out := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes() {
		out[kv.Key] = kv.Value
	}
	return out
}

// serve answers req with mux under a server span, as httpapi's middleware
// does: started before the routing, ended with the pattern that served it.
func serve(mux *http.ServeMux, req *http.Request) {
	ctx, span := tracing.StartServer(req)
	req = req.WithContext(ctx)
	w := httptest.NewRecorder()
	mux.ServeHTTP(w, req)
	span.End(req.Pattern, w.Code, int64(w.Body.Len()), w.Header().Get("X-Request-Id"))
}

// The server span: named by the route pattern, never the path; a child of
// the caller's traceparent; with the route, method and status.
func TestServerSpanNamedByItsRoute(t *testing.T) {
	rec := record(t)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /runs/{run_id}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Request-Id", "req-1")
		w.WriteHeader(http.StatusTeapot)
	})
	for _, path := range []string{"/runs/run_secret123", "/nowhere/run_other456"} {
		req := httptest.NewRequest(http.MethodGet, path, nil)
		req.Header.Set("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
		serve(mux, req)
	}
	ended := rec.Ended()
	if len(ended) != 2 {
		t.Fatalf("%d spans ended, want 2", len(ended))
	}
	route, unmatched := ended[0], ended[1]
	if route.Name() != "GET /runs/{run_id}" || unmatched.Name() != "GET" {
		t.Errorf("span names %q, %q; want the route pattern, then the method alone", route.Name(), unmatched.Name())
	}
	a := attrs(route)
	if a["http.route"].AsString() != "/runs/{run_id}" || a["http.request.method"].AsString() != "GET" ||
		a["http.response.status_code"].AsInt64() != http.StatusTeapot || a["runstream.request_id"].AsString() != "req-1" {
		t.Errorf("attributes %v", a)
	}
	if route.SpanKind() != trace.SpanKindServer || route.Parent().TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" ||
		route.Parent().SpanID().String() != "00f067aa0ba902b7" || !route.Parent().IsRemote() {
		t.Errorf("span kind %v, parent %v: want a server span child of the caller's", route.SpanKind(), route.Parent())
	}
	for _, s := range ended {
		for _, kv := range s.Attributes() {
			if strings.Contains(kv.Value.Emit(), "secret123") || strings.Contains(kv.Value.Emit(), "other456") {
				t.Errorf("span %q holds the path's id in %s", s.Name(), kv.Key)
			}
		}
	}
	if _, ok := attrs(unmatched)["http.route"]; ok {
		t.Error("an unmatched request has an http.route")
	}
}

// A request that outlives its handler (a stream that took its
// connection over) ends its span when it ends, once; a resume is an event
// of that span.
func TestServerSpanEndsOnce(t *testing.T) {
	rec := record(t)
	ctx, span := tracing.StartServer(httptest.NewRequest(http.MethodGet, "/stream", nil))
	tracing.StreamResumed(ctx, 41)
	if n := len(rec.Ended()); n != 0 {
		t.Fatalf("%d spans ended before End, want 0", n)
	}
	span.End("GET /stream", http.StatusOK, 1234, "")
	span.End("GET /stream", http.StatusOK, 99, "") // once only
	ended := rec.Ended()
	if len(ended) != 1 {
		t.Fatalf("%d spans ended, want 1", len(ended))
	}
	s := ended[0]
	if got := attrs(s)["http.response.body.size"].AsInt64(); got != 1234 {
		t.Errorf("body size %d, want the stream's 1234", got)
	}
	if _, ok := attrs(s)["runstream.request_id"]; ok {
		t.Error("a request id was recorded though none was given")
	}
	if ev := s.Events(); len(ev) != 1 || ev[0].Name != "stream.resume" || len(ev[0].Attributes) != 1 || ev[0].Attributes[0].Value.AsInt64() != 41 {
		t.Errorf("events %+v, want stream.resume at cursor 41", ev)
	}
}

// The transport starts a client span under the request's and sends its
// traceparent, without changing the caller's request; a request whose
// context has no span goes as it is.
func TestTransportPropagatesTraceparent(t *testing.T) {
	rec := record(t)
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.Header.Get("traceparent"))
	}))
	defer srv.Close()
	client := &http.Client{Transport: tracing.Transport(nil)}

	ctx, parent := tracing.Tracer().Start(context.Background(), "node")
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/path?key=s3cret", nil)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	parent.End()
	if req.Header.Get("traceparent") != "" {
		t.Error("the caller's request was changed")
	}
	req, _ = http.NewRequestWithContext(context.Background(), http.MethodGet, srv.URL, nil)
	resp, err = client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()

	ended := rec.Ended()
	if len(ended) != 2 || ended[0].Name() != "GET" || ended[0].SpanKind() != trace.SpanKindClient {
		t.Fatalf("spans %v, want a client span GET, then the parent", ended)
	}
	cs := ended[0]
	want := "00-" + cs.SpanContext().TraceID().String() + "-" + cs.SpanContext().SpanID().String() + "-01"
	if len(got) != 2 || got[0] != want || got[1] != "" {
		t.Errorf("the server got traceparents %q, want %q then none", got, want)
	}
	if cs.Parent().SpanID() != parent.SpanContext().SpanID() {
		t.Error("the client span is not the request context's span's child")
	}
	a := attrs(cs)
	if a["http.response.status_code"].AsInt64() != 200 || a["server.address"].AsString() != "127.0.0.1" {
		t.Errorf("client span attributes %v", a)
	}
	for _, kv := range cs.Attributes() {
		if strings.Contains(kv.Value.Emit(), "s3cret") || strings.Contains(kv.Value.Emit(), "/path") {
			t.Errorf("the client span holds the URL's path or query in %s", kv.Key)
		}
	}
}

// A log line written with a traced context names its trace and span;
// without one, it names none.
func TestLogHandlerAddsTraceIDs(t *testing.T) {
	record(t)
	var buf bytes.Buffer
	logger := slog.New(tracing.LogHandler(slog.NewJSONHandler(&buf, nil))).With("component", "x")
	ctx, span := tracing.Tracer().Start(context.Background(), "work")
	defer span.End()
	logger.InfoContext(ctx, "traced")
	logger.Info("untraced")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("log:\n%s", buf.String())
	}
	var traced, untraced map[string]any
	json.Unmarshal([]byte(lines[0]), &traced)
	json.Unmarshal([]byte(lines[1]), &untraced)
	if traced["trace_id"] != span.SpanContext().TraceID().String() || traced["span_id"] != span.SpanContext().SpanID().String() || traced["component"] != "x" {
		t.Errorf("traced line %v", traced)
	}
	if _, ok := untraced["trace_id"]; ok {
		t.Errorf("untraced line %v names a trace", untraced)
	}
}

// A server span is an error only for a 5xx answer, as docs/TRACING.md
// says; a client span is an error for a 4xx or 5xx answer, and for a
// transport error, whose text (which names the URL) is not in the span.
func TestSpanStatusFollowsTheAnswer(t *testing.T) {
	rec := record(t)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /status/{code}", func(w http.ResponseWriter, r *http.Request) {
		code := map[string]int{"ok": 200, "missing": 404, "broken": 503}[r.PathValue("code")]
		w.WriteHeader(code)
	})
	for _, path := range []string{"/status/ok", "/status/missing", "/status/broken"} {
		serve(mux, httptest.NewRequest(http.MethodGet, path, nil))
	}
	ended := rec.Ended()
	if len(ended) != 3 {
		t.Fatalf("%d server spans, want 3", len(ended))
	}
	for i, want := range []codes.Code{codes.Unset, codes.Unset, codes.Error} {
		if got := ended[i].Status().Code; got != want {
			t.Errorf("server span of a %v answer: status %v, want %v", attrs(ended[i])["http.response.status_code"].AsInt64(), got, want)
		}
	}

	srv := httptest.NewServer(mux)
	client := &http.Client{Transport: tracing.Transport(nil)}
	ctx, parent := tracing.Tracer().Start(context.Background(), "node")
	for _, url := range []string{srv.URL + "/status/ok", srv.URL + "/status/missing"} {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	srv.Close()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/status/ok?key=s3cret", nil)
	if resp, err := client.Do(req); err == nil {
		resp.Body.Close()
		t.Fatal("a request to a closed server succeeded")
	}
	parent.End()
	var clients []sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.SpanKind() == trace.SpanKindClient {
			clients = append(clients, s)
		}
	}
	if len(clients) != 3 {
		t.Fatalf("%d client spans, want 3", len(clients))
	}
	for i, want := range []codes.Code{codes.Unset, codes.Error, codes.Error} {
		if got := clients[i].Status().Code; got != want {
			t.Errorf("client span %d: status %v, want %v", i, got, want)
		}
	}
	if d := clients[2].Status().Description; strings.Contains(d, "s3cret") || strings.Contains(d, "127.0.0.1") {
		t.Errorf("a transport error's span status names the URL: %q", d)
	}
}

type detachedKey struct{}

// Detached keeps the span of a context, not its values or its end.
func TestDetachedKeepsTheSpanOnly(t *testing.T) {
	tp := sdktrace.NewTracerProvider()
	defer tp.Shutdown(context.Background())
	parent, cancel := context.WithCancel(context.WithValue(context.Background(), detachedKey{}, "v"))
	ctx, span := tp.Tracer("test").Start(parent, "request")
	defer span.End()
	cancel()
	d := tracing.Detached(ctx)
	if got := trace.SpanFromContext(d).SpanContext(); !got.Equal(span.SpanContext()) {
		t.Errorf("span %v, want the request's %v", got, span.SpanContext())
	}
	if d.Err() != nil || d.Value(detachedKey{}) != nil {
		t.Errorf("Detached: err %v, value %v; want neither", d.Err(), d.Value(detachedKey{}))
	}
	if got := tracing.Detached(parent); got != context.Background() {
		t.Errorf("Detached of a context without a span = %v, want context.Background()", got)
	}
}
