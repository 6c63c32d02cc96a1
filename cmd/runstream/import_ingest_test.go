package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
)

// send makes a request with a JSON body and returns the status and body.
func send(t *testing.T, method, url, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(raw)
}

// TestIngestTakesWhatDeerFlowWrites posts, over HTTP, the rows DeerFlow
// itself writes and runstream refused with 422 before: the AI rows of a
// branch seed and of a checkpoint backfill (caller and seed markers, no
// usage, latency_ms or llm_call_index) and a legacy ai_message row of its
// old journal. They are stored as written, the alias included, and the
// history reads treat the alias as an AI response: it is the run's last
// visible AI row, which carries the run's feedback on the page.
func TestIngestTakesWhatDeerFlowWrites(t *testing.T) {
	t.Parallel()
	base, _, _ := startServe(t, nil, "--store", "memory:")
	const human = `{"event_type":"llm.human.input","content":{"type":"human","content":"%s","id":"%s"},"metadata":{"caller":"lead_agent"%s}}`
	seedMarks := `,"branch_seed":true,"branch_parent_thread_id":"parent"`
	posts := []struct{ run, body string }{
		{"branch-seed-t1-1", `{"events":[` + strings.Join([]string{
			fmt.Sprintf(human, "q1", "h1", seedMarks),
			`{"event_type":"llm.ai.response","content":{"type":"ai","content":"a1","id":"a1","tool_calls":[]},"metadata":{"caller":"lead_agent"` + seedMarks + `}}`,
		}, ",") + `]}`},
		{"ckpt-1", `{"events":[` + fmt.Sprintf(human, "q2", "h2", "") + `,` +
			`{"event_type":"llm.ai.response","content":{"type":"ai","content":"a2","id":"a2","tool_calls":[]},"metadata":{"caller":"lead_agent","checkpoint_history_seed":true}}]}`},
		{"old-run", `{"events":[` + fmt.Sprintf(human, "q3", "h3", "") + `,` +
			`{"event_type":"ai_message","category":"message","content":{"type":"ai","content":"a3","id":"a3","tool_calls":[]},"metadata":{"model_name":"gpt-4o","finish_reason":"stop"}}]}`},
	}
	for _, p := range posts {
		if code, out := postJSON(t, base+"/api/threads/t1/runs/"+p.run+"/events", p.body); code != 201 {
			t.Fatalf("POST %s = %d %v", p.run, code, out)
		}
	}
	// A journal row without what the LLM call measured is still refused.
	code, out := postJSON(t, base+"/api/threads/t1/runs/r9/events",
		`{"events":[{"event_type":"llm.ai.response","content":{"type":"ai","content":"x","tool_calls":[]},"metadata":{"caller":"lead_agent"}}]}`)
	if code != 422 || !strings.Contains(out["message"].(string), "/events/0/metadata/") {
		t.Errorf("journal AI row without usage = %d %v, want 422 at /events/0/metadata", code, out)
	}

	code, body, _ := get(t, base+"/api/threads/t1/messages/page?limit=10")
	if code != 200 {
		t.Fatalf("page = %d %s", code, body)
	}
	var page struct {
		Data []struct {
			Seq       int64           `json:"seq"`
			RunID     string          `json:"run_id"`
			EventType string          `json:"event_type"`
			Category  string          `json:"category"`
			Metadata  map[string]any  `json:"metadata"`
			Feedback  json.RawMessage `json:"feedback"`
		} `json:"data"`
	}
	if err := json.Unmarshal([]byte(body), &page); err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, r := range page.Data {
		types = append(types, r.EventType)
	}
	if strings.Join(types, " ") != "llm.human.input llm.ai.response llm.human.input llm.ai.response llm.human.input ai_message" {
		t.Fatalf("page event types %v", types)
	}
	if last := page.Data[5]; last.Category != "message" || last.Metadata["finish_reason"] != "stop" {
		t.Errorf("legacy row %+v, want it as written", last)
	}

	// Feedback on the old run lands on its ai_message row, as DeerFlow's
	// page attaches it (the store's last visible AI row honours the alias).
	if code, out := send(t, "PUT", base+"/api/threads/t1/runs/old-run", `{"status":"success"}`); code/100 != 2 {
		t.Fatalf("PUT run = %d %s", code, out)
	}
	if code, out := send(t, "PUT", base+"/api/threads/t1/runs/old-run/feedback", `{"rating":1,"comment":"good"}`); code/100 != 2 {
		t.Fatalf("PUT feedback = %d %s", code, out)
	}
	_, body, _ = get(t, base+"/api/threads/t1/messages/page?limit=10")
	if err := json.Unmarshal([]byte(body), &page); err != nil {
		t.Fatal(err)
	}
	for _, r := range page.Data {
		has := string(r.Feedback) != "null"
		if want := r.EventType == "ai_message"; has != want {
			t.Errorf("seq %d (%s) feedback %s, want it on the ai_message row only", r.Seq, r.EventType, r.Feedback)
		}
	}
}
