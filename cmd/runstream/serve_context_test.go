package main

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
)

// serve --context-window sets a model's window for the context_usage of
// token usage, beside the default table; a malformed value is a usage
// error.
func TestServeContextWindowFlag(t *testing.T) {
	t.Parallel()
	base, _, _ := startServe(t, nil, "--store", "memory:", "--context-window", "house-model=2000")
	send := func(method, path, body string) string {
		t.Helper()
		req, _ := http.NewRequestWithContext(t.Context(), method, base+path, strings.NewReader(body))
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		if resp.StatusCode >= 300 {
			t.Fatalf("%s %s = %d %s", method, path, resp.StatusCode, out)
		}
		return string(out)
	}
	send("PUT", "/api/threads/t1/runs/r1", `{"status":"success","model_name":"house-model"}`)
	send("POST", "/api/threads/t1/runs/r1/events", `{"events":[{"event_type":"llm.ai.response","content":{"type":"ai","content":"a","tool_calls":[]},`+
		`"metadata":{"caller":"lead_agent","usage":{"input_tokens":1200,"output_tokens":100},"latency_ms":1,"llm_call_index":1}}]}`)
	if got := send("GET", "/api/threads/t1/token-usage", ""); !strings.Contains(got, `"context_usage":{"token_count":1300,"max_context_tokens":2000,"percentage":65}`) {
		t.Errorf("token usage = %s", got)
	}
	for _, bad := range []string{"house-model", "m=0", "=5"} {
		m := &Main{Getenv: func(string) string { return "" }}
		if err := m.Run(t.Context(), []string{"serve", "--store", "memory:", "--context-window", bad}, io.Discard, io.Discard); !errors.Is(err, errUsage) {
			t.Errorf("--context-window %s: %v, want a usage error", bad, err)
		}
	}
}
