// Package otlptest is test support: an in-process OpenTelemetry collector
// that receives traces over OTLP/HTTP (protobuf) and OTLP/gRPC and keeps
// their spans for the test to read.
package otlptest

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/hex"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// Span is one received span, with the ids in hex as W3C traceparent
// writes them.
type Span struct {
	TraceID, SpanID, ParentID string
	Name                      string
	Kind                      tracepb.Span_SpanKind
	// Attributes holds the span's attributes as strings, integers and
	// booleans.
	Attributes map[string]any
	// Events are the span's events, each with its attributes.
	Events []Event
	// Service is the service.name of the span's resource.
	Service string
	// Error is set when the span's status is an error.
	Error bool
}

// Event is a span event.
type Event struct {
	Name       string
	Attributes map[string]any
}

// Collector keeps the spans it receives. It is safe for concurrent use.
type Collector struct {
	// URL is the base URL of the OTLP/HTTP receiver: the exporter posts to
	// URL + "/v1/traces" (OTEL_EXPORTER_OTLP_ENDPOINT=URL).
	URL string
	// GRPCAddr is the host:port of the OTLP/gRPC receiver.
	GRPCAddr string

	mu       sync.Mutex
	spans    []Span
	requests int
}

// Start starts a collector that stops when the test ends.
func Start(t testing.TB) *Collector {
	t.Helper()
	c := &Collector{}
	srv := httptest.NewServer(http.HandlerFunc(c.serveHTTP))
	t.Cleanup(srv.Close)
	c.URL = srv.URL
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	coltracepb.RegisterTraceServiceServer(gs, grpcReceiver{c: c})
	go gs.Serve(ln)
	t.Cleanup(gs.Stop)
	c.GRPCAddr = ln.Addr().String()
	return c
}

// Spans returns the spans received so far.
func (c *Collector) Spans() []Span {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Span(nil), c.spans...)
}

// Requests returns the number of export requests received so far.
func (c *Collector) Requests() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.requests
}

func (c *Collector) serveHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" {
		http.Error(w, "want a POST of application/x-protobuf to /v1/traces", http.StatusBadRequest)
		return
	}
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = zr
	}
	raw, err := io.ReadAll(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var req coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(raw, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	c.add(&req)
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	io.Copy(w, bytes.NewReader(out))
}

type grpcReceiver struct {
	coltracepb.UnimplementedTraceServiceServer
	c *Collector
}

func (g grpcReceiver) Export(_ context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	g.c.add(req)
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

func (c *Collector) add(req *coltracepb.ExportTraceServiceRequest) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.requests++
	for _, rs := range req.GetResourceSpans() {
		service, _ := attributes(rs.GetResource().GetAttributes())["service.name"].(string)
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				span := Span{
					TraceID: hex.EncodeToString(s.GetTraceId()), SpanID: hex.EncodeToString(s.GetSpanId()),
					ParentID: hex.EncodeToString(s.GetParentSpanId()),
					Name:     s.GetName(), Kind: s.GetKind(), Attributes: attributes(s.GetAttributes()),
					Service: service, Error: s.GetStatus().GetCode() == tracepb.Status_STATUS_CODE_ERROR,
				}
				for _, e := range s.GetEvents() {
					span.Events = append(span.Events, Event{Name: e.GetName(), Attributes: attributes(e.GetAttributes())})
				}
				c.spans = append(c.spans, span)
			}
		}
	}
}

// attributes returns kvs as a map of strings, int64s, float64s and bools.
func attributes(kvs []*commonpb.KeyValue) map[string]any {
	out := make(map[string]any, len(kvs))
	for _, kv := range kvs {
		switch v := kv.GetValue().GetValue().(type) {
		case *commonpb.AnyValue_StringValue:
			out[kv.GetKey()] = v.StringValue
		case *commonpb.AnyValue_IntValue:
			out[kv.GetKey()] = v.IntValue
		case *commonpb.AnyValue_DoubleValue:
			out[kv.GetKey()] = v.DoubleValue
		case *commonpb.AnyValue_BoolValue:
			out[kv.GetKey()] = v.BoolValue
		}
	}
	return out
}
