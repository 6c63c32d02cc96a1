// Package tracing is runstream's OpenTelemetry instrumentation over the
// API alone: the server span of each HTTP request (started and ended by
// the server's middleware; a stream's lasts as long as the stream), the client span and traceparent of each outgoing
// request, and the trace ids of log lines. It exports nothing itself: until
// a tracer provider is installed (package tracing/otelenv), its spans are
// no-ops that cost a context lookup.
package tracing

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Scope is the instrumentation scope of runstream's spans.
const Scope = "github.com/runstream/runstream"

// Tracer returns runstream's tracer from the global provider: it follows
// the provider installed later (otel.SetTracerProvider).
func Tracer() trace.Tracer { return otel.Tracer(Scope) }

// ServerSpan is the span of one request to the server: StartServer
// starts it, End ends it. A request that outlives its handler (an SSE
// stream that took its connection over) ends it when it ends.
type ServerSpan struct {
	span trace.Span
	once sync.Once
}

// StartServer starts the server span of r, a child of the caller's
// traceparent (the global propagator's), and returns r's context holding
// it. The span is named after r's method until End names it after the
// route that served r.
func StartServer(r *http.Request) (context.Context, *ServerSpan) {
	ctx := otel.GetTextMapPropagator().Extract(r.Context(), propagation.HeaderCarrier(r.Header))
	method := methodName(r.Method)
	ctx, span := Tracer().Start(ctx, method, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(
		attribute.String("http.request.method", method),
		attribute.String("network.protocol.version", strings.TrimPrefix(r.Proto, "HTTP/")),
	))
	return ctx, &ServerSpan{span: span}
}

// End names the span after pattern, the route pattern that served the
// request, such as "GET /api/workflows/runs/{run_id}" (never the path
// with its ids; "" leaves the method alone), records the response's
// status and body bytes and the request id (requestID, "" for none), and
// ends the span. Calls after the first do nothing.
func (s *ServerSpan) End(pattern string, status int, bytes int64, requestID string) {
	s.once.Do(func() {
		if pattern != "" {
			s.span.SetName(pattern)
			route := pattern
			if _, path, ok := strings.Cut(pattern, " "); ok {
				route = path
			}
			s.span.SetAttributes(attribute.String("http.route", route))
		}
		if requestID != "" {
			s.span.SetAttributes(attribute.String("runstream.request_id", requestID))
		}
		if status == 0 {
			status = http.StatusOK
		}
		s.span.SetAttributes(
			attribute.Int("http.response.status_code", status),
			attribute.Int64("http.response.body.size", bytes),
		)
		if status >= 500 {
			s.span.SetStatus(codes.Error, http.StatusText(status))
		}
		s.span.End()
	})
}

// methodName returns the method as a span names it: a standard method, or
// "_OTHER" so that a client cannot invent span names.
func methodName(method string) string {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodOptions, http.MethodConnect, http.MethodTrace:
		return method
	}
	return "_OTHER"
}

// Detached returns a context without ctx's deadline, cancellation and
// values but its span (trace.SpanFromContext), which logs and child spans
// read: what work that outlives its request (a stream that took its
// connection over) keeps of the request's context, rather than the whole
// chain of the request's and its connection's contexts.
func Detached(ctx context.Context) context.Context {
	span := trace.SpanFromContext(ctx)
	if !span.SpanContext().IsValid() && !span.IsRecording() {
		return context.Background()
	}
	return trace.ContextWithSpan(context.Background(), span)
}

// StreamResumed records on the span of ctx that a stream resumes after
// cursor, the last seq its client received (its Last-Event-ID).
func StreamResumed(ctx context.Context, cursor int64) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	span.AddEvent("stream.resume", trace.WithAttributes(attribute.Int64("runstream.stream.cursor", cursor)))
}

// Transport returns rt (http.DefaultTransport when nil) with a client span
// per request whose context holds a span, a child of that span, and the
// client span's traceparent (the global propagator's) in the request's
// headers. The span lasts until the response's headers arrive; it names
// the method, host, port and status, never the URL's path or query, which
// may hold secrets. A request whose context holds no span is sent as it
// is.
func Transport(rt http.RoundTripper) http.RoundTripper {
	if rt == nil {
		rt = http.DefaultTransport
	}
	return &transport{next: rt, tracer: Tracer()}
}

type transport struct {
	next   http.RoundTripper
	tracer trace.Tracer
}

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if !trace.SpanContextFromContext(req.Context()).IsValid() {
		return t.next.RoundTrip(req)
	}
	method := methodName(req.Method)
	attrs := []attribute.KeyValue{
		attribute.String("http.request.method", method),
		attribute.String("url.scheme", req.URL.Scheme),
	}
	host, port := req.URL.Hostname(), req.URL.Port()
	if host != "" {
		attrs = append(attrs, attribute.String("server.address", host))
	}
	if p, err := strconv.Atoi(port); err == nil {
		attrs = append(attrs, attribute.Int("server.port", p))
	}
	ctx, span := t.tracer.Start(req.Context(), method, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
	defer span.End()
	// A RoundTripper must not change the request it is given.
	req = req.Clone(ctx)
	otel.GetTextMapPropagator().Inject(ctx, propagation.HeaderCarrier(req.Header))
	resp, err := t.next.RoundTrip(req)
	if err != nil {
		span.SetStatus(codes.Error, errorKind(err))
		return nil, err
	}
	span.SetAttributes(attribute.Int("http.response.status_code", resp.StatusCode))
	if resp.StatusCode >= 400 {
		span.SetStatus(codes.Error, http.StatusText(resp.StatusCode))
	}
	return resp, nil
}

// errorKind words a transport error without its text, which names the
// URL: "timeout", "network" or "error".
func errorKind(err error) string {
	if ne, ok := errors.AsType[net.Error](err); ok {
		if ne.Timeout() {
			return "timeout"
		}
		return "network"
	}
	return "error"
}

// LogHandler returns h adding trace_id and span_id to each record logged
// with a context that holds a valid span (Logger.InfoContext, LogAttrs…),
// so that a log line names the trace of its work.
func LogHandler(h slog.Handler) slog.Handler { return logHandler{h} }

type logHandler struct{ slog.Handler }

func (h logHandler) Handle(ctx context.Context, r slog.Record) error {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		r = r.Clone()
		r.AddAttrs(slog.String("trace_id", sc.TraceID().String()), slog.String("span_id", sc.SpanID().String()))
	}
	return h.Handler.Handle(ctx, r)
}

func (h logHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return logHandler{h.Handler.WithAttrs(attrs)}
}

func (h logHandler) WithGroup(name string) slog.Handler {
	return logHandler{h.Handler.WithGroup(name)}
}

// SetTokens records on the span of ctx (a node attempt's) the tokens a
// model call used: input (the prompt) and output (the completion), by the
// OpenTelemetry GenAI names; a count below zero is unknown and left out.
func SetTokens(ctx context.Context, input, output int64) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	if input >= 0 {
		span.SetAttributes(attribute.Int64("gen_ai.usage.input_tokens", input))
	}
	if output >= 0 {
		span.SetAttributes(attribute.Int64("gen_ai.usage.output_tokens", output))
	}
}

// SetModel records on the span of ctx (a node attempt's) the model
// provider and the model it asks.
func SetModel(ctx context.Context, provider, model string) {
	trace.SpanFromContext(ctx).SetAttributes(attribute.String("gen_ai.provider.name", provider), attribute.String("gen_ai.request.model", model))
}
