package runevents

import (
	"maps"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/runstream/runstream"
)

// PrepareRun validates a run row and fills its defaults the same way for
// every backend: ids checked, status one of the run states, text valid
// UTF-8 without NUL, operation kind "run" when empty, metadata {} when
// empty or else a compacted JSON object, timestamps now (UTC) when zero and
// truncated to microseconds. The result shares no memory with r.
func PrepareRun(r ThreadRun, now time.Time) (ThreadRun, error) {
	if err := firstError(ValidateID("thread_id", r.ThreadID), ValidateID("run_id", r.RunID)); err != nil {
		return r, err
	}
	if !r.Status.Valid() {
		return r, runstream.Errorf(runstream.CodeInvalidArgument, "invalid run status: want one of pending, running, success, error, interrupted, timeout")
	}
	for _, f := range []struct{ name, value string }{{"owner", r.OwnerID}, {"operation kind", r.OperationKind}, {"model name", r.ModelName}} {
		if !utf8.ValidString(f.value) || strings.ContainsRune(f.value, 0) {
			return r, runstream.Errorf(runstream.CodeInvalidArgument, "run %s must be valid UTF-8 without NUL characters", f.name)
		}
	}
	for model := range r.Usage.ByModel {
		if !utf8.ValidString(model) || strings.ContainsRune(model, 0) {
			return r, runstream.Errorf(runstream.CodeInvalidArgument, "run usage: model names must be valid UTF-8 without NUL characters")
		}
	}
	if r.OperationKind == "" {
		r.OperationKind = "run"
	}
	if len(r.Metadata) == 0 {
		r.Metadata = []byte(`{}`)
	} else {
		metadata, err := compact(r.Metadata)
		if err != nil || metadata[0] != '{' || !utf8.Valid(metadata) {
			return r, runstream.Errorf(runstream.CodeInvalidArgument, "run metadata must be a JSON object in valid UTF-8")
		}
		r.Metadata = metadata
	}
	now = now.UTC()
	if r.CreatedAt.IsZero() {
		r.CreatedAt = now
	}
	if r.UpdatedAt.IsZero() {
		r.UpdatedAt = now
	}
	r.CreatedAt = r.CreatedAt.Truncate(time.Microsecond)
	r.UpdatedAt = r.UpdatedAt.Truncate(time.Microsecond)
	r.Usage.ByModel = maps.Clone(r.Usage.ByModel)
	return r, nil
}
