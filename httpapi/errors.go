package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"os"
	"strings"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/internal/fastapi"
	"github.com/runstream/runstream/redact"
)

// ErrorStatus returns the HTTP status that answers an error with code, as
// contracts/errors.json gives it (status_gen.go). Unknown codes answer 500.
func ErrorStatus(code runstream.ErrorCode) int {
	if status, ok := codeStatus[code]; ok {
		return status
	}
	return http.StatusInternalServerError
}

// errorBody is the unified error body of the protocol plus requestId.
type errorBody struct {
	Code      runstream.ErrorCode `json:"code"`
	Message   string              `json:"message"`
	Retryable bool                `json:"retryable"`
	NodeID    string              `json:"nodeId,omitempty"`
	Details   map[string]any      `json:"details,omitempty"`
	RequestID string              `json:"requestId"`
	// Detail is FastAPI's member, on the thread API only (internal/fastapi).
	Detail any `json:"detail,omitempty"`
}

// writeError answers err with the unified error body. Errors that are not a
// *runstream.Error, and CodeInternal errors, are logged with their cause and
// answered with a generic message.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	e := runstream.AsError(err)
	var maxBytes *http.MaxBytesError
	if errors.As(err, &maxBytes) || errors.Is(err, os.ErrDeadlineExceeded) {
		e = runstream.AsError(bodyReadError(err))
	}
	// What goes out of e passes through echoSafe: a message, node id or
	// detail that quotes the caller is cut to a short redacted excerpt.
	details := e.Details
	body := errorBody{
		Code:      e.Code,
		Message:   echoSafe(e.Message),
		Retryable: e.Code.Retryable(),
		NodeID:    echoSafe(e.NodeID),
		RequestID: requestID(r.Context()),
	}
	status := ErrorStatus(e.Code)
	if status == http.StatusServiceUnavailable && w.Header().Get("Retry-After") == "" {
		// Every UNAVAILABLE is retryable: say when (a store outage, a key
		// in progress, a shutdown).
		w.Header().Set("Retry-After", "1")
	}
	if status >= 500 {
		s.logger.LogAttrs(r.Context(), slog.LevelError, "request failed",
			slog.String("request_id", body.RequestID),
			slog.String("code", string(e.Code)),
			slog.String("error", redact.Text(err.Error())))
		if e.Code == runstream.CodeInternal {
			body.Message = "internal error"
			details = nil
		}
	}
	body.Details = echoSafeDetails(details)
	if threadAPI(r.URL.Path) {
		body.Detail = echoSafeJSON(fastapi.Detail(body.Code, body.Message, details))
	}
	writeJSON(w, status, body)
}

// maxEchoRun is the longest run of non-space bytes an error answer keeps
// whole; a longer one (a caller's id, cursor or value quoted by the
// message) is cut to a redact.ExcerptRunes excerpt.
const maxEchoRun = 64

// echoSafe returns the text of an error as its answer may hold it: the
// secrets the default rules find replaced by their markers (redact.Text),
// and every run of more than maxEchoRun non-space bytes cut to an excerpt
// ending in "…". Messages that quote a caller's value (an id, a cursor, a
// schema problem naming the value) thus give back at most a short
// redacted excerpt of it, whichever code wrote them.
func echoSafe(s string) string {
	s = redact.Text(s)
	if len(s) <= maxEchoRun {
		return s
	}
	var b strings.Builder
	for len(s) > 0 {
		space := strings.IndexAny(s, " \t\r\n")
		run := s
		if space >= 0 {
			run = s[:space]
		}
		if len(run) > maxEchoRun {
			b.WriteString(redact.Excerpt(run))
		} else {
			b.WriteString(run)
		}
		s = s[len(run):]
		if space >= 0 {
			b.WriteByte(s[0])
			s = s[1:]
		}
	}
	return b.String()
}

// echoSafeDetails returns details with every string in it, member names
// included, passed through echoSafe. Details may hold typed values (a
// schema's problems, say): they are read as their JSON, so nothing in
// them escapes.
func echoSafeDetails(details map[string]any) map[string]any {
	if len(details) == 0 {
		return details
	}
	safe, _ := echoSafeJSON(details).(map[string]any)
	return safe
}

// echoSafeJSON returns v read as its JSON with every string in it, member
// names included, passed through echoSafe (nil when v does not encode).
func echoSafeJSON(v any) any {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	var generic any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber() // numbers as they were, seqs above 2^53 included
	if err := dec.Decode(&generic); err != nil {
		return nil
	}
	return echoSafeValue(generic)
}

func echoSafeValue(v any) any {
	switch v := v.(type) {
	case string:
		return echoSafe(v)
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, item := range v {
			out[echoSafe(k)] = echoSafeValue(item)
		}
		return out
	case []any:
		for i, item := range v {
			v[i] = echoSafeValue(item)
		}
		return v
	}
	return v
}
