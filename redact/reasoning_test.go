package redact_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/runstream/runstream/redact"
)

// A LangGraph "messages" chunk as DeerFlow streams it: an AI message chunk
// with its reasoning, and metadata, plus credentials that must go.
const chatChunk = `[{"type":"AIMessageChunk","id":"run-1","content":"The answer is 42.",` +
	`"additional_kwargs":{"reasoning_content":"First I add 40 and 2."},` +
	`"content_blocks":[{"type":"thinking","thinking":"Let me think."},{"type":"text","text":"The answer is 42."}],` +
	`"tool_calls":[{"name":"web_search","args":{"query":"x","api_key":"sk-live-0123456789abcdefghijklmnop"}}]},` +
	`{"langgraph_node":"agent","headers":"Authorization: Bearer abcdefghijklmnopqrstuvwxyz012345","db_password":"hunter2hunter2"}]`

func TestKeepReasoningKeepsWhatTheChatShows(t *testing.T) {
	out, changed, err := redact.New(redact.Options{KeepReasoning: true}).JSON([]byte(chatChunk))
	if err != nil || !changed {
		t.Fatalf("JSON: changed=%v err=%v", changed, err)
	}
	text := string(out)
	for _, keep := range []string{`"reasoning_content":"First I add 40 and 2."`, `"thinking":"Let me think."`, `"The answer is 42."`, `"langgraph_node":"agent"`} {
		if !strings.Contains(text, keep) {
			t.Errorf("lost %s: %s", keep, text)
		}
	}
	for _, secret := range []string{"sk-live-0123456789", "abcdefghijklmnopqrstuvwxyz012345", "hunter2hunter2"} {
		if strings.Contains(text, secret) {
			t.Errorf("kept secret %s: %s", secret, text)
		}
	}
	if !json.Valid(out) {
		t.Fatalf("invalid JSON: %s", out)
	}
}

func TestDefaultProfileStillDropsReasoning(t *testing.T) {
	out, _, err := redact.New(redact.Options{}).JSON([]byte(chatChunk))
	if err != nil {
		t.Fatal(err)
	}
	for _, hidden := range []string{"First I add 40 and 2.", "Let me think.", "hunter2hunter2"} {
		if strings.Contains(string(out), hidden) {
			t.Errorf("default profile kept %q: %s", hidden, out)
		}
	}
	if !strings.Contains(string(out), "The answer is 42.") {
		t.Errorf("default profile lost the chat text: %s", out)
	}
}
