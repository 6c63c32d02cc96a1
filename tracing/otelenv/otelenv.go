// Package otelenv configures OpenTelemetry tracing from the OTEL_*
// environment, as the OpenTelemetry specification names it: traces are
// exported over OTLP (HTTP/protobuf or gRPC) only when an OTLP endpoint is
// set; otherwise the tracer provider is a no-op one, with no exporter and
// no goroutine.
package otelenv

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// ServiceName is the service.name of the spans unless OTEL_SERVICE_NAME
// or OTEL_RESOURCE_ATTRIBUTES names another.
const ServiceName = "runstream"

// Tracing is the tracing Setup installed.
type Tracing struct {
	// Provider is the global tracer provider: an SDK provider exporting
	// over OTLP when Exporting, else a no-op one.
	Provider trace.TracerProvider
	// Exporting reports whether spans are exported; Protocol is then the
	// OTLP protocol: "http/protobuf" or "grpc".
	Exporting bool
	Protocol  string
	// Disabled says why nothing is exported, for the log: "" when
	// Exporting.
	Disabled string

	sdk *sdktrace.TracerProvider
}

// Setup reads the process environment (the SDK's exporter and sampler
// read it too) and installs the global tracer provider and propagator:
//
//   - OTEL_SDK_DISABLED=true, or OTEL_TRACES_EXPORTER=none: nothing is
//     exported;
//   - else OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or OTEL_EXPORTER_OTLP_ENDPOINT
//     turns the export on (without either: nothing is exported), over
//     OTEL_EXPORTER_OTLP_TRACES_PROTOCOL or OTEL_EXPORTER_OTLP_PROTOCOL:
//     http/protobuf (the default) or grpc; the exporter reads its other
//     OTEL_EXPORTER_OTLP_* variables (headers, timeout, compression,
//     certificates) itself;
//   - OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG choose the sampler
//     (default parentbased_always_on), OTEL_BSP_* tune the batch
//     processor;
//   - OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES describe the service
//     (default service.name "runstream", service.version version);
//   - OTEL_PROPAGATORS lists the propagators: tracecontext and baggage
//     (the default), or none.
//
// A variable with a value it does not support is an error, with nothing
// installed. The SDK's errors (an export that failed) are logged to
// logger. Shutdown flushes the spans not yet exported.
func Setup(ctx context.Context, version string, logger *slog.Logger) (*Tracing, error) {
	t := &Tracing{Provider: noop.NewTracerProvider()}
	exporterName := os.Getenv("OTEL_TRACES_EXPORTER")
	if exporterName != "" && exporterName != "otlp" && exporterName != "none" {
		return nil, fmt.Errorf("OTEL_TRACES_EXPORTER=%q: runstream exports traces with otlp or none", exporterName)
	}
	switch {
	case strings.EqualFold(strings.TrimSpace(os.Getenv("OTEL_SDK_DISABLED")), "true"):
		t.Disabled = "OTEL_SDK_DISABLED is true"
	case exporterName == "none":
		t.Disabled = "OTEL_TRACES_EXPORTER is none"
	case firstEnv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT") == "":
		t.Disabled = "no OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set"
	}
	if t.Disabled != "" {
		otel.SetTracerProvider(t.Provider)
		return t, nil
	}
	propagator, err := propagators()
	if err != nil {
		return nil, err
	}
	t.Protocol = cmp.Or(firstEnv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"), "http/protobuf")
	var exporter sdktrace.SpanExporter
	switch t.Protocol {
	case "http/protobuf":
		exporter, err = otlptracehttp.New(ctx)
	case "grpc":
		exporter, err = otlptracegrpc.New(ctx)
	default:
		return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL=%q: runstream exports traces over http/protobuf or grpc", t.Protocol)
	}
	if err != nil {
		return nil, fmt.Errorf("create the OTLP trace exporter: %w", err)
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", ServiceName), attribute.String("service.version", version)),
		resource.WithFromEnv(), resource.WithTelemetrySDK())
	if err != nil && res == nil {
		return nil, fmt.Errorf("describe the service: %w", err)
	}
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		logger.Warn("opentelemetry", "error", err)
	}))
	t.sdk = sdktrace.NewTracerProvider(sdktrace.WithBatcher(exporter), sdktrace.WithResource(res))
	t.Provider, t.Exporting = t.sdk, true
	otel.SetTracerProvider(t.sdk)
	otel.SetTextMapPropagator(propagator)
	return t, nil
}

// Shutdown flushes the spans not yet exported and stops the exporter,
// within ctx; the global provider is a no-op one from then on.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if t.sdk == nil {
		return nil
	}
	otel.SetTracerProvider(noop.NewTracerProvider())
	if err := t.sdk.Shutdown(ctx); err != nil {
		return fmt.Errorf("flush the traces: %w", err)
	}
	return nil
}

// propagators returns the propagators OTEL_PROPAGATORS lists.
func propagators() (propagation.TextMapPropagator, error) {
	v := cmp.Or(os.Getenv("OTEL_PROPAGATORS"), "tracecontext,baggage")
	var list []propagation.TextMapPropagator
	for name := range strings.SplitSeq(v, ",") {
		switch strings.TrimSpace(name) {
		case "tracecontext":
			list = append(list, propagation.TraceContext{})
		case "baggage":
			list = append(list, propagation.Baggage{})
		case "none":
		default:
			return nil, fmt.Errorf("OTEL_PROPAGATORS lists %q: runstream supports tracecontext, baggage and none", name)
		}
	}
	return propagation.NewCompositeTextMapPropagator(list...), nil
}

// firstEnv returns the first of the variables that is set, else "".
func firstEnv(names ...string) string {
	for _, n := range names {
		if v := strings.TrimSpace(os.Getenv(n)); v != "" {
			return v
		}
	}
	return ""
}
