package runstream_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"testing"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/contracts"
)

type errorsContract struct {
	Codes []struct {
		Code      string `json:"code"`
		Retryable bool   `json:"retryable"`
		Meaning   string `json:"meaning"`
	} `json:"codes"`
}

func loadErrorsContract(t *testing.T) errorsContract {
	t.Helper()
	raw, err := fs.ReadFile(contracts.FS(), contracts.ErrorsFile)
	if err != nil {
		t.Fatal(err)
	}
	var c errorsContract
	if err := json.Unmarshal(raw, &c); err != nil {
		t.Fatal(err)
	}
	if len(c.Codes) == 0 {
		t.Fatal("contract has no codes")
	}
	return c
}

func TestErrorCodesMatchContract(t *testing.T) {
	t.Parallel()
	c := loadErrorsContract(t)
	var want []runstream.ErrorCode
	for _, e := range c.Codes {
		want = append(want, runstream.ErrorCode(e.Code))
	}
	got := runstream.ErrorCodes()
	if !slices.Equal(got, want) {
		t.Fatalf("ErrorCodes() = %v\ncontract has %v", got, want)
	}
	for _, e := range c.Codes {
		code := runstream.ErrorCode(e.Code)
		if !code.Known() {
			t.Errorf("%s.Known() = false", code)
		}
		if got := code.Retryable(); got != e.Retryable {
			t.Errorf("%s.Retryable() = %t, contract says %t", code, got, e.Retryable)
		}
		if got := code.Meaning(); got != e.Meaning {
			t.Errorf("%s.Meaning() = %q, contract says %q", code, got, e.Meaning)
		}
		if got := (&runstream.Error{Code: code}).Retryable(); got != e.Retryable {
			t.Errorf("Error{%s}.Retryable() = %t", code, got)
		}
	}
	codes := runstream.ErrorCodes()
	codes[0] = "TAMPERED"
	if runstream.ErrorCodes()[0] == "TAMPERED" {
		t.Error("ErrorCodes() exposes the package's slice")
	}
}

// TestRequiredCodesExist lists the codes the issue and the protocol name, so
// removing one from the contract fails here, not in a client.
func TestRequiredCodesExist(t *testing.T) {
	t.Parallel()
	required := []string{
		"INVALID_ARGUMENT", "INVALID_JSON", "UNAUTHENTICATED", "PERMISSION_DENIED",
		"NOT_FOUND", "METHOD_NOT_ALLOWED", "CONFLICT", "PAYLOAD_TOO_LARGE",
		"UNSUPPORTED_MEDIA_TYPE", "VALIDATION_FAILED", "RATE_LIMITED", "INTERNAL", "UNAVAILABLE",
	}
	for _, suffix := range []string{
		"NOT_FOUND", "VERSION_NOT_FOUND", "RUN_NOT_FOUND", "DEFINITION_INVALID", "INPUT_INVALID",
		"INVALID_CURSOR", "RUN_ALREADY_TERMINAL", "RUN_NOT_AWAITING_INPUT", "RESUME_TOKEN_INVALID",
		"RESUME_TOKEN_EXPIRED", "RESUME_ACTION_INVALID", "FORM_INVALID", "SQL_POLICY_DENIED",
		"NODE_TIMEOUT", "NODE_FAILED", "LLM_PROVIDER_ERROR", "HTTP_NODE_ERROR", "WORKER_LOST",
	} {
		required = append(required, "WORKFLOW_"+suffix)
	}
	codes := runstream.ErrorCodes()
	for _, code := range required {
		if !slices.Contains(codes, runstream.ErrorCode(code)) {
			t.Errorf("code %s is missing", code)
		}
	}
}

func TestErrorCodeTable(t *testing.T) {
	t.Parallel()
	// A few rows checked against the protocol's intent, independently of the
	// contract file. The HTTP statuses are httpapi's (TestErrorStatus).
	tests := []struct {
		code      runstream.ErrorCode
		retryable bool
	}{
		{runstream.CodeInvalidArgument, false},
		{runstream.CodeNotFound, false},
		{runstream.CodeValidationFailed, false},
		{runstream.CodeRateLimited, true},
		{runstream.CodeInternal, true},
		{runstream.CodeUnavailable, true},
		{runstream.CodeWorkflowInvalidCursor, false},
		{runstream.CodeWorkflowRunAlreadyTerminal, false},
		{runstream.CodeWorkflowResumeTokenExpired, false},
		{runstream.CodeWorkflowNodeTimeout, true},
		{"NO_SUCH_CODE", false},
	}
	for _, tt := range tests {
		if got := tt.code.Retryable(); got != tt.retryable {
			t.Errorf("%s.Retryable() = %t, want %t", tt.code, got, tt.retryable)
		}
	}
	if runstream.ErrorCode("NO_SUCH_CODE").Known() {
		t.Error("unknown code reports Known")
	}
}

func TestErrorMessageHidesCause(t *testing.T) {
	t.Parallel()
	const secret = "postgres://app:hunter2@db.internal:5432/runstream"
	driver := fmt.Errorf("dial %s: connection refused", secret)
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"wrapped cause", runstream.Wrap(driver, runstream.CodeUnavailable, "store unavailable"), "store unavailable"},
		{"wrapped twice", fmt.Errorf("append events: %w", runstream.Wrap(driver, runstream.CodeUnavailable, "store unavailable")), "store unavailable"},
		{"plain driver error", driver, "internal error"},
		{"driver error wrapped by op", fmt.Errorf("list runs: %w", driver), "internal error"},
		{"Errorf", runstream.Errorf(runstream.CodeWorkflowRunNotFound, "run %s not found", "run_01"), "run run_01 not found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := runstream.ErrorMessage(tt.err)
			if got != tt.want {
				t.Errorf("ErrorMessage = %q, want %q", got, tt.want)
			}
			if strings.Contains(got, "hunter2") || strings.Contains(got, "connection refused") {
				t.Errorf("ErrorMessage leaks the cause: %q", got)
			}
			if ae := runstream.AsError(tt.err); strings.Contains(ae.Message, "hunter2") {
				t.Errorf("AsError(...).Message leaks the cause: %q", ae.Message)
			}
		})
	}
	// The cause stays available to logs.
	err := runstream.Wrap(driver, runstream.CodeUnavailable, "store unavailable")
	if !errors.Is(err, driver) || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("Error() = %q, want the cause for logs", err.Error())
	}
}

func TestAsError(t *testing.T) {
	t.Parallel()
	if runstream.AsError(nil) != nil {
		t.Error("AsError(nil) != nil")
	}
	app := runstream.Errorf(runstream.CodeConflict, "busy").WithNode("agent_writer").WithDetail("rule", "single_writer")
	if got := runstream.AsError(fmt.Errorf("op: %w", app)); got != app {
		t.Errorf("AsError(wrapped) = %v, want the *Error in the chain", got)
	}
	if app.NodeID != "agent_writer" || app.Details["rule"] != "single_writer" {
		t.Errorf("WithNode/WithDetail gave %+v", app)
	}
	plain := errors.New("disk I/O error")
	got := runstream.AsError(plain)
	if got.Code != runstream.CodeInternal || got.Message != "internal error" || !errors.Is(got, plain) {
		t.Errorf("AsError(plain) = %+v", got)
	}
	if runstream.ErrorCodeOf(nil) != "" || runstream.ErrorCodeOf(plain) != runstream.CodeInternal ||
		runstream.ErrorCodeOf(fmt.Errorf("op: %w", app)) != runstream.CodeConflict {
		t.Error("ErrorCodeOf does not follow the chain")
	}
}
