package tracing_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/runstream/runstream/tracing"
	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace/noop"
)

// BenchmarkOff is what the instrumentation costs with the no-op provider
// serve installs when no OTEL_* endpoint is set: a span around some work,
// a log line through LogHandler, an outgoing request through Transport.
func BenchmarkOff(b *testing.B) {
	prev := otel.GetTracerProvider()
	otel.SetTracerProvider(noop.NewTracerProvider())
	b.Cleanup(func() { otel.SetTracerProvider(prev) })
	benchSpans(b)
}

// BenchmarkOn is the same with an SDK provider that records every span
// (no export).
func BenchmarkOn(b *testing.B) {
	prev := otel.GetTracerProvider()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(tracetest.NewSpanRecorder()))
	otel.SetTracerProvider(tp)
	b.Cleanup(func() { otel.SetTracerProvider(prev); tp.Shutdown(context.Background()) })
	benchSpans(b)
}

func benchSpans(b *testing.B) {
	b.Run("span", func(b *testing.B) {
		ctx := context.Background()
		for b.Loop() {
			_, span := tracing.Tracer().Start(ctx, "workflow.node llm")
			tracing.SetTokens(ctx, 7, 3)
			span.End()
		}
	})
	b.Run("log", func(b *testing.B) {
		logger := slog.New(tracing.LogHandler(slog.NewJSONHandler(io.Discard, nil)))
		ctx, span := tracing.Tracer().Start(context.Background(), "work")
		defer span.End()
		for b.Loop() {
			logger.InfoContext(ctx, "request", "status", 200)
		}
	})
	b.Run("transport", func(b *testing.B) {
		rt := tracing.Transport(roundTripFunc(func(*http.Request) (*http.Response, error) {
			return &http.Response{StatusCode: 200, Body: io.NopCloser(bytes.NewReader(nil))}, nil
		}))
		ctx, span := tracing.Tracer().Start(context.Background(), "node")
		defer span.End()
		req := httptest.NewRequest(http.MethodGet, "http://example.com/x", nil).WithContext(ctx)
		for b.Loop() {
			rt.RoundTrip(req)
		}
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
