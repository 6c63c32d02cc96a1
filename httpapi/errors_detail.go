package httpapi

import (
	"strconv"
	"strings"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/contracts"
)

// threadAPI reports whether path is on the thread API (the routes of
// DeerFlow's routers), whose errors carry FastAPI's detail beside the
// unified members, for DeerFlow's clients. The workflow API keeps its
// frozen body.
func threadAPI(path string) bool {
	return strings.HasPrefix(path, "/api/threads/") || strings.HasPrefix(path, "/api/runs/")
}

// fastAPIItem is one item of FastAPI's validation detail.
type fastAPIItem struct {
	Loc  []any  `json:"loc"`
	Msg  string `json:"msg"`
	Type string `json:"type"`
}

// pathParameters are the path parameters of the thread API; any other
// parameter an error names is a query parameter, or a header when it is
// IdempotencyKeyHeader.
var pathParameters = map[string]bool{"thread_id": true, "run_id": true, "feedback_id": true}

// fastAPIDetail returns what FastAPI's detail member would say of an
// error: for VALIDATION_FAILED that names a parameter (details.parameter)
// or members of the body (details.problems), a list of {loc, msg, type}
// whose loc names it (["path","thread_id"], ["query","limit"],
// ["body","events",0,"run_id"]); otherwise the message.
func fastAPIDetail(code runstream.ErrorCode, msg string, details map[string]any) any {
	if code != runstream.CodeValidationFailed {
		return msg
	}
	if name, ok := details["parameter"].(string); ok {
		where := "query"
		switch {
		case pathParameters[name]:
			where = "path"
		case name == IdempotencyKeyHeader:
			where = "header"
		}
		return []fastAPIItem{{Loc: []any{where, name}, Msg: msg, Type: detailType(msg)}}
	}
	var items []fastAPIItem
	switch problems := details["problems"].(type) {
	case []map[string]string:
		for _, p := range problems {
			items = append(items, fastAPIItem{Loc: bodyLoc(p["path"]), Msg: p["message"], Type: detailType(p["message"])})
		}
	case []contracts.Problem:
		for _, p := range problems {
			items = append(items, fastAPIItem{Loc: bodyLoc(p.Path), Msg: p.Message, Type: detailType(p.Message)})
		}
	}
	if items == nil {
		return msg
	}
	return items
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
