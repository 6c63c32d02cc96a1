// Package fastapi renders runstream's errors as the detail member of
// FastAPI's error bodies, which DeerFlow's clients read: the message, or
// for a validation error a list of {loc, msg, type} naming the field.
package fastapi

import (
	"strconv"
	"strings"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/contracts"
)

// Item is one item of FastAPI's validation detail.
type Item struct {
	Loc  []any  `json:"loc"`
	Msg  string `json:"msg"`
	Type string `json:"type"`
}

// pathParameters are the path parameters of the thread API; any other
// parameter an error names is a query parameter, or a header when its name
// has a hyphen (Idempotency-Key; no query parameter has one), unless the
// error says where it is (details.in: "query", "path" or "header").
var pathParameters = map[string]bool{"thread_id": true, "run_id": true, "feedback_id": true}

// Detail returns what FastAPI's detail member would say of an error: for
// VALIDATION_FAILED that names a parameter (details.parameter), several
// (details.parameters: {parameter, in, message} each) or members of the
// body (details.problems), a list of {loc, msg, type}
// whose loc names it (["path","thread_id"], ["query","limit"],
// ["body","events",0,"run_id"]); otherwise the message.
func Detail(code runstream.ErrorCode, msg string, details map[string]any) any {
	if code != runstream.CodeValidationFailed {
		return msg
	}
	if name, ok := details["parameter"].(string); ok {
		in, _ := details["in"].(string)
		return []Item{{Loc: parameterLoc(name, in), Msg: msg, Type: detailType(msg)}}
	}
	var items []Item
	if params, ok := details["parameters"].([]map[string]string); ok {
		// Several parameters failed: FastAPI lists each.
		for _, p := range params {
			items = append(items, Item{Loc: parameterLoc(p["parameter"], p["in"]), Msg: p["message"], Type: detailType(p["message"])})
		}
	}
	switch problems := details["problems"].(type) {
	case []map[string]string:
		for _, p := range problems {
			items = append(items, Item{Loc: bodyLoc(p["path"]), Msg: p["message"], Type: detailType(p["message"])})
		}
	case []contracts.Problem:
		for _, p := range problems {
			items = append(items, Item{Loc: bodyLoc(p.Path), Msg: p.Message, Type: detailType(p.Message)})
		}
	}
	if items == nil {
		return msg
	}
	return items
}

// parameterLoc is the loc of a request parameter: where it is (in, when
// the error says; else by its name), then its name.
func parameterLoc(name, in string) []any {
	where := "query"
	switch {
	case in != "":
		where = in
	case pathParameters[name]:
		where = "path"
	case strings.Contains(name, "-"):
		where = "header"
	}
	return []any{where, name}
}

// bodyLoc turns a JSON pointer into FastAPI's loc: "body", then each
// member name, or array index as a number.
func bodyLoc(pointer string) []any {
	loc := []any{"body"}
	if pointer == "" {
		return loc
	}
	for _, part := range strings.Split(strings.TrimPrefix(pointer, "/"), "/") {
		part = strings.NewReplacer("~1", "/", "~0", "~").Replace(part)
		if n, err := strconv.Atoi(part); err == nil && n >= 0 {
			loc = append(loc, n)
			continue
		}
		loc = append(loc, part)
	}
	return loc
}

// detailType is FastAPI's error type for a message: "missing" for a
// required member, else "value_error".
func detailType(msg string) string {
	if strings.HasPrefix(msg, "required") {
		return "missing"
	}
	return "value_error"
}
