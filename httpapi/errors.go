package httpapi

import (
	"errors"
	"log/slog"
	"net/http"
	"os"

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
	// What goes out of e passes through redact.Echo: a message, node id or
	// detail that quotes the caller is cut to a short redacted excerpt.
	details := e.Details
	body := errorBody{
		Code:      e.Code,
		Message:   redact.Echo(e.Message),
		Retryable: e.Code.Retryable(),
		NodeID:    redact.Echo(e.NodeID),
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
	body.Details = redact.EchoDetails(details)
	if threadAPI(r.URL.Path) {
		body.Detail = redact.EchoJSON(fastapi.Detail(body.Code, body.Message, details))
	}
	writeJSON(w, status, body)
}
