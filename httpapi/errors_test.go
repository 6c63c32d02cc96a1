package httpapi

import (
	"encoding/json"
	"io/fs"
	"net/http"
	"testing"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/contracts"
)

// TestErrorStatusFollowsTheContract reads contracts/errors.json itself, so a
// status table out of step with the contract fails here as well as in
// contractgen's staleness test.
func TestErrorStatusFollowsTheContract(t *testing.T) {
	t.Parallel()
	raw, err := fs.ReadFile(contracts.FS(), contracts.ErrorsFile)
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		Codes []struct {
			Code   runstream.ErrorCode `json:"code"`
			Status int                 `json:"status"`
		} `json:"codes"`
	}
	if err := json.Unmarshal(raw, &c); err != nil {
		t.Fatal(err)
	}
	if len(c.Codes) == 0 || len(c.Codes) != len(runstream.ErrorCodes()) {
		t.Fatalf("contract has %d codes, runstream.ErrorCodes() %d", len(c.Codes), len(runstream.ErrorCodes()))
	}
	for _, e := range c.Codes {
		if got := ErrorStatus(e.Code); got != e.Status {
			t.Errorf("ErrorStatus(%s) = %d, contract says %d", e.Code, got, e.Status)
		}
	}
}

func TestErrorStatus(t *testing.T) {
	t.Parallel()
	// A few rows checked against the protocol's intent, independently of the
	// contract file.
	tests := []struct {
		code   runstream.ErrorCode
		status int
	}{
		{runstream.CodeInvalidArgument, http.StatusBadRequest},
		{runstream.CodeNotFound, http.StatusNotFound},
		{runstream.CodeValidationFailed, http.StatusUnprocessableEntity},
		{runstream.CodeRateLimited, http.StatusTooManyRequests},
		{runstream.CodeInternal, http.StatusInternalServerError},
		{runstream.CodeUnavailable, http.StatusServiceUnavailable},
		{runstream.CodeWorkflowInvalidCursor, http.StatusBadRequest},
		{runstream.CodeWorkflowRunAlreadyTerminal, http.StatusConflict},
		{runstream.CodeWorkflowResumeTokenExpired, http.StatusGone},
		{runstream.CodeWorkflowNodeTimeout, http.StatusGatewayTimeout},
		{"NO_SUCH_CODE", http.StatusInternalServerError},
	}
	for _, tt := range tests {
		if got := ErrorStatus(tt.code); got != tt.status {
			t.Errorf("ErrorStatus(%s) = %d, want %d", tt.code, got, tt.status)
		}
	}
}
