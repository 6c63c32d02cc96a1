package httpapi

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/runstream/runstream"
	"github.com/runstream/runstream/internal/httprec"
	"github.com/runstream/runstream/redact"
	"github.com/runstream/runstream/tracing"
)

type requestIDKey struct{}

// RequestIDHeader carries the request id in requests and responses.
const RequestIDHeader = "X-Request-Id"

var requestIDPattern = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,128}$`)

func requestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}

func newRequestID() string {
	var b [12]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

type metrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	inFlight prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "runstream_http_requests_total",
			Help: "HTTP requests answered, by route pattern, method and status code.",
		}, []string{"route", "method", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "runstream_http_request_duration_seconds",
			Help:    "Time to answer HTTP requests (for streams: the stream's lifetime), by route pattern.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 4, 10),
		}, []string{"route"}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "runstream_http_requests_in_flight",
			Help: "HTTP requests being answered, streams included.",
		}),
	}
	reg.MustRegister(m.requests, m.duration, m.inFlight)
	return m
}

// instrument wraps the router: request id, body limit and deadline,
// panic recovery, metrics, the JSON access log and the server span.
func (s *Server) instrument(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get(RequestIDHeader)
		if !requestIDPattern.MatchString(id) || redact.Text(id) != id {
			// Not echoed nor logged: a malformed id, or one shaped like
			// a secret (a key pasted into the wrong header).
			id = newRequestID()
		}
		entry := &accessEntry{server: s, start: time.Now(), id: id}
		if s.cfg.Tracing {
			var ctx context.Context
			ctx, entry.span = tracing.StartServer(r)
			r = r.WithContext(ctx)
		}
		entry.ctx = r.Context()
		ctx := context.WithValue(context.WithValue(r.Context(), requestIDKey{}, id), accessEntryKey{}, entry)
		r = r.WithContext(ctx)
		w.Header().Set(RequestIDHeader, id)
		if r.Body != nil && r.Body != http.NoBody {
			r.Body = s.deadlineBody(w, http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes))
		}
		rec := &httprec.Writer{ResponseWriter: w}
		s.metrics.inFlight.Inc()
		defer func() {
			if p := recover(); p != nil {
				if p == http.ErrAbortHandler {
					// A stream cut on purpose (its lifetime, a slow
					// reader, a shutdown): logged and counted as aborted.
					if !entry.detached {
						entry.aborted = true
						entry.describe(r)
						entry.finish(rec.Status, rec.Bytes)
					}
					panic(p)
				}
				s.logger.LogAttrs(r.Context(), slog.LevelError, "panic in handler",
					slog.String("request_id", id), slog.String("panic", redact.Text(fmt.Sprint(p))))
				if rec.Status == 0 {
					s.writeError(rec, r, runstream.Wrap(errors.New("handler panic"), runstream.CodeInternal, "internal error"))
				}
			}
			if entry.detached {
				return // the stream that took the request over finishes it
			}
			entry.describe(r)
			entry.finish(rec.Status, rec.Bytes)
		}()
		next.ServeHTTP(rec, r)
	})
}

// deadlineBody returns body read under the server's body deadline: the
// connection's read deadline is set to BodyTimeout from now, so a read
// past it fails with os.ErrDeadlineExceeded (answered 408
// REQUEST_TIMEOUT, see bodyReadError), and cleared once the body ended,
// so that it never cuts a handler that outlives it. A ResponseWriter
// without deadlines (HTTP/2 without them, a test recorder) reads the body
// as it comes.
func (s *Server) deadlineBody(w http.ResponseWriter, body io.ReadCloser) io.ReadCloser {
	rc := http.NewResponseController(w)
	if rc.SetReadDeadline(time.Now().Add(s.cfg.BodyTimeout)) != nil {
		return body
	}
	return &deadlineReader{ReadCloser: body, rc: rc}
}

// deadlineReader clears its connection's read deadline at the body's end.
type deadlineReader struct {
	io.ReadCloser
	rc   *http.ResponseController
	done bool
}

func (d *deadlineReader) Read(p []byte) (int, error) {
	n, err := d.ReadCloser.Read(p)
	if err == io.EOF && !d.done {
		d.done = true
		d.rc.SetReadDeadline(time.Time{})
	}
	return n, err
}

type accessEntryKey struct{}

// accessEntry is what the access log, the request metrics and the server
// span record of one request. It holds no reference to the request or its
// connection (only its context's values), so a stream that outlives its
// handler can keep it.
type accessEntry struct {
	server                                 *Server
	start                                  time.Time
	id, method, path, query, route, remote string
	// pattern is the route pattern that served the request, "" for none.
	pattern string
	ctx     context.Context // the request's, for the log's trace ids
	// span is the request's server span; nil without Config.Tracing.
	span *tracing.ServerSpan
	// detached is set when a stream took the request over from its handler
	// (see detachAccess); the stream then calls finish.
	detached bool
	// aborted is set when the handler ended the request by
	// http.ErrAbortHandler: the access log says so.
	aborted bool
}

// describe records what the access log says of r: its method as the
// metrics label it (methodLabel), its path redacted (logRedact), the
// names of its query parameters (queryNames), never their values, and its
// route pattern.
func (e *accessEntry) describe(r *http.Request) {
	e.method, e.remote = methodLabel(r.Method), r.RemoteAddr
	e.path = logRedact(r.URL.Path)
	e.query = queryNames(r.URL.RawQuery)
	e.pattern, e.route = r.Pattern, r.Pattern
	if e.route == "" {
		e.route = "unmatched"
	}
}

// finish counts the request, writes its access log line and ends its
// span.
func (e *accessEntry) finish(status int, bytes int64) {
	if e.span != nil {
		defer e.span.End(e.pattern, status, bytes, e.id)
	}
	if status == 0 {
		status = http.StatusOK
	}
	elapsed := time.Since(e.start)
	m := e.server.metrics
	m.inFlight.Dec()
	m.requests.WithLabelValues(e.route, e.method, strconv.Itoa(status)).Inc()
	m.duration.WithLabelValues(e.route).Observe(elapsed.Seconds())
	e.server.logger.LogAttrs(e.ctx, slog.LevelInfo, "request",
		slog.String("request_id", e.id),
		slog.String("method", e.method),
		slog.String("path", e.path),
		slog.String("query", e.query),
		slog.String("route", e.route),
		slog.Int("status", status),
		slog.Int64("bytes", bytes),
		slog.Duration("duration", elapsed),
		slog.String("remote", e.remote),
		slog.Bool("aborted", e.aborted))
}

// methodLabel returns the method as the metrics and the access log name
// it: one of the methods the API knows, else "other", so that a client
// cannot invent label values.
func methodLabel(method string) string {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodOptions:
		return method
	}
	return "other"
}

// queryNames returns the names of a raw query's parameters as the access
// log keeps them: in order, each once, redacted and cut to an excerpt,
// joined by commas; at most 20. A value may be a credential whatever its
// name ("signature", "code"), so none is kept.
func queryNames(raw string) string {
	var names []string
	for part := range strings.SplitSeq(raw, "&") {
		name, _, _ := strings.Cut(part, "=")
		if unescaped, err := url.QueryUnescape(name); err == nil {
			name = unescaped
		}
		if name = redact.Excerpt(name); name != "" && !slices.Contains(names, name) {
			names = append(names, name)
		}
		if len(names) == 20 {
			break
		}
	}
	return strings.Join(names, ",")
}

// logRedact returns a request path as the access log keeps it:
// each piece between '/', '?' and '&' redacted as a bare value (a key
// sent as one path segment), and within a piece the text after each '=',
// from the last, as the start of a line ("q=X-Api-Key: …"); then the
// whole, for what spans pieces (a DSN sent as a thread id).
func logRedact(s string) string {
	var b strings.Builder
	start := 0
	for i := 0; i <= len(s); i++ {
		if i < len(s) && s[i] != '/' && s[i] != '?' && s[i] != '&' {
			continue
		}
		piece := s[start:i]
		for eq := strings.LastIndexByte(piece, '='); eq >= 0; eq = strings.LastIndexByte(piece[:eq], '=') {
			piece = piece[:eq+1] + redact.Text(piece[eq+1:])
		}
		b.WriteString(redact.Text(piece))
		if i < len(s) {
			b.WriteByte(s[i])
		}
		start = i + 1
	}
	return redact.Text(b.String())
}

// detachAccess hands the end of r's accounting to a stream that outlives
// its handler: the handler's return no longer logs or counts r; the stream
// calls finish(status, bytes) when it ends. It returns nil when r did not
// come through instrument.
func detachAccess(r *http.Request) (finish func(status int, bytes int64)) {
	e, _ := r.Context().Value(accessEntryKey{}).(*accessEntry)
	if e == nil {
		return nil
	}
	e.describe(r)
	e.detached = true
	e.ctx = tracing.Detached(e.ctx) // the log's trace ids, without the request's contexts
	return e.finish
}
