package runstream

import (
	"errors"
	"fmt"
)

// ErrorCode is a stable, machine-readable error code. The set of codes, and
// the retryability and meaning of each, come from contracts/errors.json; the
// HTTP status of each is the HTTP layer's (httpapi.ErrorStatus), generated
// from the same contract.
type ErrorCode string

// Retryable reports whether a client may retry the same request unchanged.
func (c ErrorCode) Retryable() bool {
	return errorCodes[c].retryable
}

// Meaning returns the one-line description of the code from the contract.
func (c ErrorCode) Meaning() string {
	return errorCodes[c].meaning
}

// Known reports whether c is a code of the contract.
func (c ErrorCode) Known() bool {
	_, ok := errorCodes[c]
	return ok
}

// ErrorCodes returns every code of the contract in contract order.
func ErrorCodes() []ErrorCode {
	return append([]ErrorCode(nil), errorCodeOrder...)
}

type errorCodeInfo struct {
	retryable bool
	meaning   string
}

// Error is the application error. Its Code, Message, NodeID and Details are
// safe to show to the caller; Err, the cause, is for logs only and never
// reaches a response body.
type Error struct {
	Code    ErrorCode
	Message string
	// NodeID names the workflow node the error concerns, if any.
	NodeID string
	// Details carries structured, caller-safe context (for example
	// {"rule": "single_read_statement"}).
	Details map[string]any
	// Err is the underlying cause. It is returned by Unwrap and logged, never
	// sent to the caller.
	Err error
}

// Errorf returns an *Error with the given code and a formatted message.
func Errorf(code ErrorCode, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Error implements the error interface. The text includes the cause, so it
// belongs in logs, not in response bodies (use ErrorMessage for those).
func (e *Error) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%s: %s: %v", e.Code, e.Message, e.Err)
	}
	return fmt.Sprintf("%s: %s", e.Code, e.Message)
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Retryable reports whether the caller may retry; it follows the code table.
func (e *Error) Retryable() bool { return e.Code.Retryable() }

// WithDetail returns e with key set in Details. It modifies e.
func (e *Error) WithDetail(key string, value any) *Error {
	if e.Details == nil {
		e.Details = map[string]any{}
	}
	e.Details[key] = value
	return e
}

// WithNode returns e with NodeID set. It modifies e.
func (e *Error) WithNode(nodeID string) *Error {
	e.NodeID = nodeID
	return e
}

// Wrap returns an *Error with the given code and message whose cause is err.
func Wrap(err error, code ErrorCode, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...), Err: err}
}

// ErrorCodeOf returns the code of the first *Error in err's chain, or
// CodeInternal for any other non-nil error, or "" for nil.
func ErrorCodeOf(err error) ErrorCode {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return CodeInternal
}

// ErrorMessage returns the caller-safe message of err: the Message of the
// first *Error in its chain, or a generic text for any other error, so that
// driver errors, SQL and connection strings never reach a caller.
func ErrorMessage(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Message
	}
	return "internal error"
}

// AsError returns the first *Error in err's chain, or a CodeInternal *Error
// wrapping err. It returns nil for nil.
func AsError(err error) *Error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return &Error{Code: CodeInternal, Message: "internal error", Err: err}
}
