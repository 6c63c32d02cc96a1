package otelenv_test

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/runstream/runstream/internal/otlptest"
	"github.com/runstream/runstream/tracing"
	"github.com/runstream/runstream/tracing/otelenv"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace/noop"
	"go.uber.org/goleak"
)

// The tests set the process environment and the global provider: none is
// parallel.

var otelVars = []string{
	"OTEL_SDK_DISABLED", "OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
	"OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_INSECURE",
	"OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES", "OTEL_TRACES_SAMPLER", "OTEL_PROPAGATORS",
}

// clearEnv unsets the OTEL_* variables for the test, then sets env.
func clearEnv(t *testing.T, env map[string]string) {
	t.Helper()
	for _, name := range otelVars {
		t.Setenv(name, "")
	}
	for k, v := range env {
		t.Setenv(k, v)
	}
}

var discard = slog.New(slog.NewTextHandler(io.Discard, nil))

// setup runs Setup and shuts it down when the test ends.
func setup(t *testing.T) *otelenv.Tracing {
	t.Helper()
	tr, err := otelenv.Setup(t.Context(), "v-test", discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Shutdown(context.Background()) })
	return tr
}

// traceSomething makes a span through the global provider, as runstream's
// instrumentation does, and flushes the tracing.
func traceSomething(t *testing.T, tr *otelenv.Tracing) {
	t.Helper()
	_, span := tracing.Tracer().Start(context.Background(), "work")
	span.End()
	if err := tr.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// Without an OTLP endpoint, or when disabled, the provider is a no-op
// one: no exporter, no goroutine, nothing exported.
func TestOffUnlessConfigured(t *testing.T) {
	collector := otlptest.Start(t)
	for _, tc := range []struct {
		name, reason string
		env          map[string]string
	}{
		{"nothing set", "no OTEL_EXPORTER_OTLP_ENDPOINT", nil},
		{"only a service name", "no OTEL_EXPORTER_OTLP_ENDPOINT", map[string]string{"OTEL_SERVICE_NAME": "x", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}},
		{"sdk disabled", "OTEL_SDK_DISABLED", map[string]string{"OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": collector.URL}},
		{"exporter none", "OTEL_TRACES_EXPORTER is none", map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": collector.URL + "/v1/traces"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clearEnv(t, tc.env)
			defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
			tr := setup(t)
			if _, ok := tr.Provider.(noop.TracerProvider); !ok || tr.Exporting {
				t.Errorf("provider %T, exporting %v: want a no-op provider", tr.Provider, tr.Exporting)
			}
			if _, ok := otel.GetTracerProvider().(noop.TracerProvider); !ok {
				t.Errorf("the global provider is %T, want noop", otel.GetTracerProvider())
			}
			if !strings.Contains(tr.Disabled, tc.reason) {
				t.Errorf("Disabled = %q, want it to name %q", tr.Disabled, tc.reason)
			}
			_, span := tracing.Tracer().Start(context.Background(), "work")
			if span.IsRecording() || span.SpanContext().IsValid() {
				t.Error("a span records")
			}
			span.End()
			traceSomething(t, tr)
		})
	}
	if n := collector.Requests(); n != 0 {
		t.Errorf("the collector got %d export requests", n)
	}
}

// With an endpoint, spans are exported over the protocol the environment
// names, to the endpoint it names, as the service it names; the sampler
// is the environment's too.
func TestExportsOverTheConfiguredProtocol(t *testing.T) {
	collector := otlptest.Start(t)
	for _, tc := range []struct {
		name     string
		env      map[string]string
		protocol string
		spans    int
		service  string
	}{
		{"http base endpoint", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": collector.URL}, "http/protobuf", 1, "runstream"},
		{"http traces endpoint", map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": collector.URL + "/v1/traces", "OTEL_SERVICE_NAME": "rs-1"}, "http/protobuf", 1, "rs-1"},
		{"grpc", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://" + collector.GRPCAddr, "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
			"OTEL_EXPORTER_OTLP_INSECURE": "true", "OTEL_RESOURCE_ATTRIBUTES": "service.name=rs-grpc"}, "grpc", 1, "rs-grpc"},
		{"sampled out", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": collector.URL, "OTEL_TRACES_SAMPLER": "always_off"}, "http/protobuf", 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clearEnv(t, tc.env)
			before := len(collector.Spans())
			tr := setup(t)
			if !tr.Exporting || tr.Protocol != tc.protocol || tr.Disabled != "" {
				t.Fatalf("exporting %v over %q (%q), want over %s", tr.Exporting, tr.Protocol, tr.Disabled, tc.protocol)
			}
			traceSomething(t, tr)
			got := collector.Spans()[before:]
			if len(got) != tc.spans {
				t.Fatalf("%d spans exported, want %d", len(got), tc.spans)
			}
			for _, s := range got {
				if s.Name != "work" || s.Service != tc.service {
					t.Errorf("span %q of service %q, want work of %q", s.Name, s.Service, tc.service)
				}
			}
			if _, ok := otel.GetTracerProvider().(noop.TracerProvider); !ok {
				t.Errorf("after Shutdown the global provider is %T, want noop", otel.GetTracerProvider())
			}
		})
	}
}

// A value runstream does not support is an error, not a silent default.
func TestUnsupportedValues(t *testing.T) {
	for _, env := range []map[string]string{
		{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"},
		{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_TRACES_EXPORTER": "zipkin"},
		{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_PROPAGATORS": "b3"},
	} {
		clearEnv(t, env)
		if tr, err := otelenv.Setup(t.Context(), "v", discard); err == nil {
			tr.Shutdown(context.Background())
			t.Errorf("Setup with %v: no error", env)
		}
	}
}
