package httpapi

import "strings"

// threadAPI reports whether path is on the thread API (the routes of
// DeerFlow's routers), whose errors carry FastAPI's detail beside the
// unified members, for DeerFlow's clients. The workflow API keeps its
// frozen body.
func threadAPI(path string) bool {
	return path == "/api/threads" || path == "/api/runs" ||
		strings.HasPrefix(path, "/api/threads/") || strings.HasPrefix(path, "/api/runs/")
}
