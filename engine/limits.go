package engine

import "github.com/runstream/runstream"

// Values of details.limit of WORKFLOW_NODE_LIMIT_EXCEEDED, naming the
// bound a node or a run tripped (see also LimitExpressionBudget and
// sqlnode.LimitOutputBytes).
const (
	LimitOutputBytes    = "output_bytes"
	LimitRunOutputBytes = "run_output_bytes"
	LimitArtifactBytes  = "artifact_bytes"
	LimitEventBytes     = "event_bytes"
)

// limitError returns WORKFLOW_NODE_LIMIT_EXCEEDED with details.limit. It
// is not retryable: the same attempt would trip the same bound.
func limitError(limit, format string, args ...any) *runstream.Error {
	return runstream.Errorf(runstream.CodeWorkflowNodeLimitExceeded, format, args...).WithDetail("limit", limit)
}
