package httpapi

import (
	"errors"
	"net/url"
	"strconv"
	"strings"

	"github.com/runstream/runstream"
)

// Query parameters of the thread endpoints. They follow the original
// service (FastAPI): a value that breaks its rule answers
// VALIDATION_FAILED with details.parameter; a parameter given twice does
// too.

func badParam(name, format string, args ...any) error {
	return runstream.Errorf(runstream.CodeValidationFailed, "%s: "+format, append([]any{name}, args...)...).
		WithDetail("parameter", name).WithDetail("in", "query")
}

// queryProblems joins the outcomes of reading a request's query
// parameters, as FastAPI reports every parameter that fails: nil when
// none failed, the error when one did, else VALIDATION_FAILED whose
// details.parameters lists each ({parameter, in, message}). An error that
// is no parameter's (badParam's) is returned as it is.
func queryProblems(errs ...error) error {
	var failed []*runstream.Error
	for _, err := range errs {
		if err == nil {
			continue
		}
		rerr, ok := errors.AsType[*runstream.Error](err)
		if !ok || rerr.Code != runstream.CodeValidationFailed || rerr.Details["parameter"] == nil {
			return err
		}
		failed = append(failed, rerr)
	}
	switch len(failed) {
	case 0:
		return nil
	case 1:
		return failed[0]
	}
	msgs := make([]string, len(failed))
	params := make([]map[string]string, len(failed))
	for i, f := range failed {
		msgs[i] = f.Message
		name, _ := f.Details["parameter"].(string)
		in, _ := f.Details["in"].(string)
		params[i] = map[string]string{"parameter": name, "in": in, "message": f.Message}
	}
	return runstream.Errorf(runstream.CodeValidationFailed, "%s", strings.Join(msgs, "; ")).WithDetail("parameters", params)
}

// queryValue returns the one value of a query parameter and whether it is
// present.
func queryValue(q url.Values, name string) (string, bool, error) {
	values, ok := q[name]
	if !ok {
		return "", false, nil
	}
	if len(values) > 1 {
		return "", true, badParam(name, "given more than once")
	}
	return values[0], true, nil
}

// queryInt returns an optional integer parameter within [min, max].
func queryInt(q url.Values, name string, min, max int64) (*int64, error) {
	v, ok, err := queryValue(q, name)
	if err != nil || !ok {
		return nil, err
	}
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil || n < min || n > max {
		if max == maxInt64 && !errors.Is(err, strconv.ErrRange) {
			return nil, badParam(name, "must be an integer >= %d", min)
		}
		return nil, badParam(name, "must be an integer from %d to %d", min, max)
	}
	return &n, nil
}

// queryIntOrZero is queryInt with 0 for an absent parameter.
func queryIntOrZero(q url.Values, name string, min, max int64) (int64, error) {
	n, err := queryInt(q, name, min, max)
	if n == nil {
		return 0, err
	}
	return *n, nil
}

const maxInt64 = 1<<63 - 1

// querySeq returns an optional sequence cursor (an integer >= 1).
func querySeq(q url.Values, name string) (*int64, error) {
	return queryInt(q, name, 1, maxInt64)
}

// queryLimit returns the limit parameter, def when absent.
func queryLimit(q url.Values, def, max int) (int, error) {
	n, err := queryInt(q, "limit", 1, int64(max))
	if err != nil || n == nil {
		return def, err
	}
	return int(*n), nil
}

// queryBool returns an optional boolean parameter, def when absent. It
// accepts the spellings the original service does: true/false, 1/0,
// yes/no, on/off, t/f, y/n, in any case.
func queryBool(q url.Values, name string, def bool) (bool, error) {
	v, ok, err := queryValue(q, name)
	if err != nil || !ok {
		return def, err
	}
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "true", "1", "yes", "on", "t", "y":
		return true, nil
	case "false", "0", "no", "off", "f", "n":
		return false, nil
	}
	return false, badParam(name, "must be a boolean")
}
