package httpapi

import (
	"net/http"
	"strconv"

	"github.com/runstream/runstream"
)

// maxCursorBytes bounds the length of a cursor value.
const maxCursorBytes = 64

// parseCursor returns the stream cursor of a request: the Last-Event-ID
// header when present and not empty, else the "after" query parameter, else
// 0. Either must be a canonical non-negative decimal (no sign, no leading
// zero, no space, no exponent) that fits in an int64; anything else is
// WORKFLOW_INVALID_CURSOR.
func parseCursor(r *http.Request) (int64, error) {
	if ids := r.Header.Values("Last-Event-ID"); len(ids) > 1 {
		return 0, runstream.Errorf(runstream.CodeWorkflowInvalidCursor, "more than one Last-Event-ID header")
	} else if len(ids) == 1 && ids[0] != "" {
		return parseSeq("Last-Event-ID", ids[0])
	}
	return parseAfter(r)
}

// parseAfter returns the "after" query parameter, or its other name
// "after_seq" (the protocol names both), or 0 when absent.
func parseAfter(r *http.Request) (int64, error) {
	q := r.URL.Query()
	after, hasAfter := q["after"]
	afterSeq, hasAfterSeq := q["after_seq"]
	name, values := "after", after
	switch {
	case hasAfter && hasAfterSeq:
		return 0, runstream.Errorf(runstream.CodeWorkflowInvalidCursor, "give after or after_seq, not both")
	case hasAfterSeq:
		name, values = "after_seq", afterSeq
	case !hasAfter:
		return 0, nil
	}
	if len(values) > 1 {
		return 0, runstream.Errorf(runstream.CodeWorkflowInvalidCursor, "more than one %s parameter", name)
	}
	return parseSeq(name, values[0])
}

// parseSeq parses a canonical non-negative decimal sequence number.
func parseSeq(name, s string) (int64, error) {
	if len(s) > maxCursorBytes {
		return 0, runstream.Errorf(runstream.CodeWorkflowInvalidCursor, "%s is longer than %d bytes", name, maxCursorBytes)
	}
	canonical := s != "" && (s == "0" || s[0] != '0')
	for i := 0; canonical && i < len(s); i++ {
		canonical = '0' <= s[i] && s[i] <= '9'
	}
	if !canonical {
		return 0, runstream.Errorf(runstream.CodeWorkflowInvalidCursor, "%s must be a non-negative decimal sequence number without sign, leading zeros or spaces", name).
			WithDetail("parameter", name)
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, runstream.Errorf(runstream.CodeWorkflowInvalidCursor, "%s is out of range", name).WithDetail("parameter", name)
	}
	return n, nil
}

// parseLimit parses an optional positive "limit" query parameter.
func parseLimit(r *http.Request, def, max int) (int, error) {
	values, ok := r.URL.Query()["limit"]
	if !ok {
		return def, nil
	}
	if len(values) > 1 {
		return 0, runstream.Errorf(runstream.CodeInvalidArgument, "more than one limit parameter")
	}
	n, err := strconv.Atoi(values[0])
	if err != nil || n < 1 || n > max {
		return 0, runstream.Errorf(runstream.CodeInvalidArgument, "limit must be an integer from 1 to %d", max).WithDetail("parameter", "limit")
	}
	return n, nil
}
