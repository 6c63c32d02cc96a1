package journal_test

import (
	"encoding/json"
	"testing"
	"testing/synctest"
	"time"

	"github.com/runstream/runstream/journal"
	"github.com/runstream/runstream/runevents"
)

func toolMessage(callID, name, text string) journal.Message {
	return journal.Message{Type: "tool", ToolCallID: callID, Name: name, Content: journal.TextContent(text)}
}

// askLead makes the lead agent request a tool call.
func askLead(t *testing.T, j *journal.Journal, callID, tool, callName string) {
	t.Helper()
	j.LLMEnd(t.Context(), journal.LLMEnd{CallID: callName, Generations: []*journal.Message{{Type: "ai",
		ToolCalls: []journal.ToolCall{{ID: callID, Name: tool, Args: map[string]any{}}}}}})
}

func TestToolEnd(t *testing.T) {
	t.Parallel()
	j, sink := setup(t, journal.Options{})
	ctx := t.Context()
	tm := toolMessage("t1", "web_search", "results")
	j.ToolEnd(ctx, journal.ToolEnd{Message: &tm})
	j.ToolEnd(ctx, journal.ToolEnd{Update: &journal.StateUpdate{Messages: []journal.Message{
		toolMessage("t2", "write", "ok"), human("a human message in an update")}}})
	j.ToolEnd(ctx, journal.ToolEnd{})
	flush(t, j)
	got := sink.ofType(runevents.EventLLMToolResult)
	if len(got) != 3 {
		t.Fatalf("%d tool results, want 3", len(got))
	}
	if c := decode(t, got[0].Content); c["tool_call_id"] != "t1" || c["content"] != "results" || string(got[0].Metadata) != `{}` {
		t.Errorf("tool result = %s %s", got[0].Content, got[0].Metadata)
	}
	if c := decode(t, got[2].Content); c["type"] != "human" {
		t.Errorf("update message = %s", got[2].Content)
	}
	if n := j.Summary().MessageCount; n != 3 {
		t.Errorf("message count = %d", n)
	}
}

func TestFinalToolMessageReconciliation(t *testing.T) {
	t.Parallel()
	hidden := toolMessage("c-hidden", "ask_clarification", "hidden")
	hidden.AdditionalKwargs = map[string]any{"hide_from_ui": true}
	withArtifact := toolMessage("c-ask", "ask_clarification", "Which colour?")
	withArtifact.Artifact = map[string]any{"options": []any{"red", "blue"}}
	for _, tc := range []struct {
		name     string
		captured bool
		message  journal.Message
		want     int
	}{
		{"missing clarification added", false, withArtifact, 1},
		{"already captured", true, withArtifact, 1},
		{"previous run's clarification", false, toolMessage("c-old", "ask_clarification", "old"), 0},
		{"not allowlisted", false, toolMessage("c-search", "web_search", "results"), 0},
		{"hidden", false, hidden, 0},
		{"no tool call id", false, toolMessage("", "ask_clarification", "?"), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			j, sink := setup(t, journal.Options{})
			for _, id := range []string{"c-ask", "c-hidden", "c-search", ""} {
				tool := "ask_clarification"
				if id == "c-search" {
					tool = "web_search"
				}
				askLead(t, j, id, tool, "call-"+id)
			}
			if tc.captured {
				m := tc.message
				j.ToolEnd(t.Context(), journal.ToolEnd{Message: &m})
			}
			j.ChainEnd(t.Context(), journal.ChainEnd{Outputs: map[string]any{"messages": []any{tc.message}}})
			flush(t, j)
			got := sink.ofType(runevents.EventLLMToolResult)
			if len(got) != tc.want {
				t.Fatalf("%d tool results, want %d", len(got), tc.want)
			}
			if tc.want == 1 && tc.message.Artifact != nil {
				if c := decode(t, got[0].Content); c["artifact"] == nil {
					t.Errorf("artifact lost: %s", got[0].Content)
				}
			}
			types := sink.types()
			if types[len(types)-1] != runevents.EventRunEnd {
				t.Errorf("run.end is not last: %v", types)
			}
		})
	}
}

func TestDeliveryContent(t *testing.T) {
	t.Parallel()
	j, sink := setup(t, journal.Options{})
	ctx := t.Context()
	askLead(t, j, "p1", "present_files", "a")
	j.ToolEnd(ctx, journal.ToolEnd{Update: &journal.StateUpdate{
		Messages:  []journal.Message{toolMessage("p1", "present_files", "ok")},
		Artifacts: []string{"/mnt/user-data/outputs/a.md", "", "/mnt/user-data/outputs/a.md", "/mnt/user-data/outputs/b.md"}}})
	j.ToolEnd(ctx, journal.ToolEnd{Update: &journal.StateUpdate{
		Messages:  []journal.Message{toolMessage("unknown", "x", "ok")},
		Artifacts: []string{"/mnt/user-data/outputs/c.md"}}})
	d := j.Delivery()
	raw, _ := json.Marshal(d)
	want := `{"presented":3,"paths":["/mnt/user-data/outputs/a.md","/mnt/user-data/outputs/b.md","/mnt/user-data/outputs/c.md"],"by_tool":{"present_files":["/mnt/user-data/outputs/a.md","/mnt/user-data/outputs/b.md"]}}`
	if string(raw) != want {
		t.Errorf("delivery = %s\nwant       %s", raw, want)
	}
	sink.failAbsent = 2
	var created bool
	var err error
	synctest.Test(t, func(t *testing.T) { created, err = j.RecordDelivery(t.Context(), d) })
	if err != nil || !created {
		t.Fatalf("RecordDelivery = %v, %v", created, err)
	}
	created, err = j.RecordDelivery(ctx, d)
	if err != nil || created {
		t.Fatalf("second RecordDelivery = %v, %v", created, err)
	}
	if got := sink.ofType(runevents.EventRunDelivery); len(got) != 1 || string(got[0].Content) != want {
		t.Errorf("receipts = %v", got)
	}
}

func TestDeliveryGivesUpAfterThreeAttempts(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		j, sink := setup(t, journal.Options{})
		sink.failAbsent = 4
		start := time.Now()
		if _, err := j.RecordDelivery(t.Context(), j.Delivery()); err == nil {
			t.Fatal("no error after three failed attempts")
		}
		if sink.failAbsent != 1 {
			t.Errorf("%d attempts, want 3", 4-sink.failAbsent)
		}
		if waited := time.Since(start); waited != 600*time.Millisecond {
			t.Errorf("waited %v between attempts, want 100ms + 500ms", waited)
		}
	})
}

func TestMiddlewareAndMemory(t *testing.T) {
	t.Parallel()
	j, sink := setup(t, journal.Options{})
	ctx := t.Context()
	if err := j.RecordMiddleware(ctx, "guardrail", "Guardrail", "before_model", "block", map[string]any{"reason": "x"}); err != nil {
		t.Fatal(err)
	}
	if err := j.RecordMiddleware(ctx, "", "n", "h", "a", nil); err == nil {
		t.Error("empty tag accepted")
	}
	if err := j.RecordMiddleware(ctx, "a_tag_of_twenty_two_c", "n", "h", "a", nil); err != nil {
		t.Errorf("21-character tag refused: %v", err)
	}
	if err := j.RecordMiddleware(ctx, "a_tag_of_twenty_two_ch", "n", "h", "a", nil); err == nil {
		t.Error("22-character tag accepted")
	}
	sha := "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	sink.failAbsent = 1
	if err := j.RecordMemoryContext(ctx, sha); err == nil {
		t.Fatal("failed write reported no error")
	}
	for range 2 {
		if err := j.RecordMemoryContext(ctx, sha); err != nil {
			t.Fatal(err)
		}
	}
	flush(t, j)
	mw := sink.ofType("middleware:guardrail")
	if len(mw) != 1 || mw[0].Category != runevents.CategoryMiddleware ||
		string(mw[0].Content) != `{"action":"block","changes":{"reason":"x"},"hook":"before_model","name":"Guardrail"}` {
		t.Errorf("middleware = %v", mw)
	}
	mem := sink.ofType(runevents.EventContextMemory)
	if len(mem) != 1 || string(mem[0].Content) != `{"content_sha256":"`+sha+`"}` {
		t.Errorf("memory = %v", mem)
	}
}
