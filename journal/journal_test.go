package journal_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/journal"
	"github.com/runstream/runstream/runevents"
)

// fakeSink records what the journal writes; failAppends makes the next n
// Append calls fail.
type fakeSink struct {
	mu          sync.Mutex
	events      []runevents.NewEvent
	batches     int
	failAppends int
	failAbsent  int
	runs        []runevents.ThreadRun
	// block, when set, holds Append until it is closed.
	block chan struct{}
}

func (s *fakeSink) Append(ctx context.Context, events []runevents.NewEvent) error {
	s.mu.Lock()
	block := s.block
	s.mu.Unlock()
	if block != nil {
		<-block
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failAppends > 0 {
		s.failAppends--
		return errors.New("store down")
	}
	s.batches++
	s.events = append(s.events, events...)
	return nil
}

func (s *fakeSink) AppendIfAbsent(ctx context.Context, e runevents.NewEvent) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failAbsent > 0 {
		s.failAbsent--
		return false, errors.New("store down")
	}
	for _, old := range s.events {
		if old.RunID == e.RunID && old.EventType == e.EventType {
			return false, nil
		}
	}
	s.events = append(s.events, e)
	return true, nil
}

func (s *fakeSink) PutRun(ctx context.Context, run runevents.ThreadRun) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.runs = append(s.runs, run)
	return nil
}

func (s *fakeSink) types() []runevents.EventType {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []runevents.EventType
	for _, e := range s.events {
		out = append(out, e.EventType)
	}
	return out
}

func (s *fakeSink) ofType(t runevents.EventType) []runevents.NewEvent {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []runevents.NewEvent
	for _, e := range s.events {
		if e.EventType == t {
			out = append(out, e)
		}
	}
	return out
}

func setup(t *testing.T, opts journal.Options) (*journal.Journal, *fakeSink) {
	t.Helper()
	sink := &fakeSink{}
	opts.ThreadID, opts.RunID = "t1", "r1"
	j, err := journal.New(sink, opts)
	if err != nil {
		t.Fatal(err)
	}
	return j, sink
}

func flush(t *testing.T, j *journal.Journal) {
	t.Helper()
	if err := j.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
}

func human(text string) journal.Message {
	return journal.Message{Type: "human", Content: journal.TextContent(text)}
}

func ai(text string, usage *journal.Usage, model string) *journal.Message {
	m := &journal.Message{Type: "ai", Content: journal.TextContent(text), UsageMetadata: usage}
	if model != "" {
		m.ResponseMetadata = map[string]any{"model_name": model}
	}
	return m
}

func decode(t *testing.T, raw json.RawMessage) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("decode %s: %v", raw, err)
	}
	return m
}

func TestCallerOf(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		tags []string
		want string
	}{
		{nil, "lead_agent"},
		{[]string{"x", "subagent:research", "middleware:title"}, "subagent:research"},
		{[]string{"middleware:summarize"}, "middleware:summarize"},
		{[]string{"unknown"}, "lead_agent"},
		{[]string{"lead_agent", "subagent:a"}, "lead_agent"},
	} {
		if got := journal.CallerOf(tc.tags); got != tc.want {
			t.Errorf("CallerOf(%q) = %q, want %q", tc.tags, got, tc.want)
		}
	}
}

func TestRunStartEndOnlyForRootChains(t *testing.T) {
	t.Parallel()
	j, sink := setup(t, journal.Options{})
	ctx := t.Context()
	j.ChainStart(ctx, journal.ChainStart{Name: "agent", Metadata: map[string]any{"caller": "override", "x": 1.0}})
	j.ChainStart(ctx, journal.ChainStart{ParentID: "p", Name: "inner"})
	j.ChainEnd(ctx, journal.ChainEnd{ParentID: "p", Outputs: "inner"})
	j.ChainError(ctx, journal.ChainError{ParentID: "p", Err: errors.New("inner failed")})
	j.ChainEnd(ctx, journal.ChainEnd{Outputs: map[string]any{"answer": 42.0}})
	flush(t, j)
	want := []runevents.EventType{runevents.EventRunStart, runevents.EventRunError, runevents.EventRunEnd}
	if got := sink.types(); !slices.Equal(got, want) {
		t.Fatalf("types = %v, want %v", got, want)
	}
	start := sink.ofType(runevents.EventRunStart)[0]
	if string(start.Content) != `{"chain":"agent"}` || string(start.Metadata) != `{"caller":"override","x":1}` {
		t.Errorf("run.start = %s %s", start.Content, start.Metadata)
	}
	runErr := sink.ofType(runevents.EventRunError)[0]
	if string(runErr.Content) != `"inner failed"` || decode(t, runErr.Metadata)["error_type"] != "*errors.errorString" {
		t.Errorf("run.error = %s %s", runErr.Content, runErr.Metadata)
	}
	end := sink.ofType(runevents.EventRunEnd)[0]
	if string(end.Content) != `{"answer":42}` || string(end.Metadata) != `{"status":"success"}` {
		t.Errorf("run.end = %s %s", end.Content, end.Metadata)
	}
	j.ChainStart(ctx, journal.ChainStart{})
	flush(t, j)
	if got := sink.ofType(runevents.EventRunStart)[1]; string(got.Content) != `{"chain":"unknown"}` || string(got.Metadata) != `{"caller":"lead_agent"}` {
		t.Errorf("unnamed run.start = %s %s", got.Content, got.Metadata)
	}
}

func TestHumanInputCapturedOncePerRun(t *testing.T) {
	t.Parallel()
	j, sink := setup(t, journal.Options{})
	ctx := t.Context()
	j.ChatModelStart(ctx, journal.ChatModelStart{CallID: "c1", Prompts: [][]journal.Message{{
		{Type: "system", Content: journal.TextContent("be brief")}, human("first question")}}})
	j.ChatModelStart(ctx, journal.ChatModelStart{CallID: "c2", Prompts: [][]journal.Message{{
		human("first question"), human("second question")}}})
	flush(t, j)
	got := sink.ofType(runevents.EventLLMHumanInput)
	if len(got) != 1 {
		t.Fatalf("%d human inputs, want 1", len(got))
	}
	if c := decode(t, got[0].Content); c["content"] != "first question" || c["type"] != "human" {
		t.Errorf("content = %s", got[0].Content)
	}
	if string(got[0].Metadata) != `{"caller":"lead_agent"}` {
		t.Errorf("metadata = %s", got[0].Metadata)
	}
	s := j.Summary()
	if s.FirstHumanMessage != "first question" || s.MessageCount != 1 {
		t.Errorf("summary = %+v", s)
	}
}

func validReply(source string) map[string]any {
	return map[string]any{"version": 1.0, "kind": "human_input_response", "source": source,
		"request_id": "q1", "value": "blue", "response_kind": "text"}
}

func TestHumanInputSelection(t *testing.T) {
	t.Parallel()
	hidden := human("internal")
	hidden.AdditionalKwargs = map[string]any{"hide_from_ui": true}
	summary := human("summary of earlier turns")
	summary.Name = "summary"
	reply := human("blue")
	reply.AdditionalKwargs = map[string]any{"hide_from_ui": true, "human_input_response": validReply("ask_clarification")}
	future := human("approve")
	future.AdditionalKwargs = map[string]any{"hide_from_ui": true, "human_input_response": validReply("future_approval")}
	badOption := validReply("ask_clarification")
	badOption["response_kind"] = "option"
	optionReply := human("choice")
	optionReply.AdditionalKwargs = map[string]any{"hide_from_ui": true, "human_input_response": badOption}

	for _, tc := range []struct {
		name    string
		tags    []string
		prompts [][]journal.Message
		want    string // "" = no event
	}{
		{"middleware prompt", []string{"middleware:title"}, [][]journal.Message{{human("title this")}}, ""},
		{"subagent prompt", []string{"subagent:research"}, [][]journal.Message{{human("research")}}, ""},
		{"hidden only", nil, [][]journal.Message{{hidden}}, ""},
		{"summary only", nil, [][]journal.Message{{summary}}, ""},
		{"empty prompt", nil, nil, ""},
		{"clarification reply wins over older visible", nil, [][]journal.Message{{human("older"), {Type: "ai"}, reply}}, "blue"},
		{"non-allowlisted source ignored", nil, [][]journal.Message{{human("visible"), future}}, "visible"},
		{"option without option_id", nil, [][]journal.Message{{optionReply}}, ""},
		{"latest batch first", nil, [][]journal.Message{{human("batch one")}, {human("batch two")}}, "batch two"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			j, sink := setup(t, journal.Options{})
			j.ChatModelStart(t.Context(), journal.ChatModelStart{CallID: "c1", Tags: tc.tags, Prompts: tc.prompts})
			flush(t, j)
			got := sink.ofType(runevents.EventLLMHumanInput)
			if tc.want == "" {
				if len(got) != 0 {
					t.Fatalf("captured %s", got[0].Content)
				}
				return
			}
			if len(got) != 1 || decode(t, got[0].Content)["content"] != tc.want {
				t.Fatalf("captured %v, want %q", got, tc.want)
			}
		})
	}
}

func TestHiddenPromptDoesNotBlockLaterVisible(t *testing.T) {
	t.Parallel()
	j, sink := setup(t, journal.Options{})
	hidden := human("internal")
	hidden.AdditionalKwargs = map[string]any{"hide_from_ui": true}
	j.ChatModelStart(t.Context(), journal.ChatModelStart{CallID: "c1", Prompts: [][]journal.Message{{hidden}}})
	j.ChatModelStart(t.Context(), journal.ChatModelStart{CallID: "c2", Prompts: [][]journal.Message{{human("hello")}}})
	flush(t, j)
	if got := sink.ofType(runevents.EventLLMHumanInput); len(got) != 1 || decode(t, got[0].Content)["content"] != "hello" {
		t.Fatalf("captured %v", got)
	}
}

func TestClarificationReplyKeepsItsMarkers(t *testing.T) {
	t.Parallel()
	j, sink := setup(t, journal.Options{})
	reply := human("blue")
	reply.AdditionalKwargs = map[string]any{"hide_from_ui": true, "human_input_response": validReply("ask_clarification")}
	j.ChatModelStart(t.Context(), journal.ChatModelStart{CallID: "c1", Prompts: [][]journal.Message{{reply}}})
	flush(t, j)
	c := decode(t, sink.ofType(runevents.EventLLMHumanInput)[0].Content)
	kw := c["additional_kwargs"].(map[string]any)
	if kw["hide_from_ui"] != true || kw["human_input_response"].(map[string]any)["source"] != "ask_clarification" {
		t.Errorf("additional_kwargs = %v", kw)
	}
}

func TestHumanInputOriginalContentRestored(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, content, want string
	}{
		{"string", `"sanitized"`, `"typed by the user"`},
		{"list", `[{"type":"image_url","image_url":"x"},{"type":"text","text":"a"},{"type":"text","text":"b"}]`,
			`[{"image_url":"x","type":"image_url"},{"text":"typed by the user","type":"text"}]`},
		{"list without text", `[{"type":"image_url","image_url":"x"}]`,
			`[{"text":"typed by the user","type":"text"},{"image_url":"x","type":"image_url"}]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			j, sink := setup(t, journal.Options{})
			m := journal.Message{Type: "human", Content: json.RawMessage(tc.content),
				AdditionalKwargs: map[string]any{"original_user_content": "typed by the user", "keep": true}}
			j.ChatModelStart(t.Context(), journal.ChatModelStart{CallID: "c1", Prompts: [][]journal.Message{{m}}})
			flush(t, j)
			var c struct {
				Content          json.RawMessage `json:"content"`
				AdditionalKwargs map[string]any  `json:"additional_kwargs"`
			}
			if err := json.Unmarshal(sink.ofType(runevents.EventLLMHumanInput)[0].Content, &c); err != nil {
				t.Fatal(err)
			}
			if string(c.Content) != tc.want {
				t.Errorf("content = %s, want %s", c.Content, tc.want)
			}
			if _, ok := c.AdditionalKwargs["original_user_content"]; ok || c.AdditionalKwargs["keep"] != true {
				t.Errorf("additional_kwargs = %v", c.AdditionalKwargs)
			}
			if j.Summary().FirstHumanMessage != "typed by the user" {
				t.Errorf("first human = %q", j.Summary().FirstHumanMessage)
			}
			if string(m.Content) != tc.content {
				t.Errorf("the model's message changed: %s", m.Content)
			}
		})
	}
}

func TestImageOnlyHumanInputCapturedOnce(t *testing.T) {
	t.Parallel()
	j, sink := setup(t, journal.Options{})
	img := journal.Message{Type: "human", Content: json.RawMessage(`[{"type":"image_url","image_url":"x"}]`)}
	j.ChatModelStart(t.Context(), journal.ChatModelStart{CallID: "c1", Prompts: [][]journal.Message{{img}}})
	j.ChatModelStart(t.Context(), journal.ChatModelStart{CallID: "c2", Prompts: [][]journal.Message{{img}}})
	flush(t, j)
	if got := sink.ofType(runevents.EventLLMHumanInput); len(got) != 1 {
		t.Fatalf("%d human inputs, want 1", len(got))
	}
	if j.Summary().FirstHumanMessage != "" {
		t.Errorf("first human = %q", j.Summary().FirstHumanMessage)
	}
}

func TestAIResponseMetadata(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		j, sink := setup(t, journal.Options{})
		ctx := t.Context()
		j.ChatModelStart(ctx, journal.ChatModelStart{CallID: "c1"})
		time.Sleep(1500 * time.Millisecond)
		j.LLMEnd(ctx, journal.LLMEnd{CallID: "c1", Generations: []*journal.Message{
			ai("one", &journal.Usage{InputTokens: 10, OutputTokens: 5, TotalTokens: 15}, "m1"), nil, ai("two", nil, "")}})
		j.LLMEnd(ctx, journal.LLMEnd{CallID: "orphan", Tags: []string{"subagent:x"}, Generations: []*journal.Message{ai("three", nil, "")}})
		flush(t, j)
		got := sink.ofType(runevents.EventLLMAIResponse)
		if len(got) != 3 {
			t.Fatalf("%d ai responses, want 3", len(got))
		}
		first, second, third := decode(t, got[0].Metadata), decode(t, got[1].Metadata), decode(t, got[2].Metadata)
		if first["latency_ms"] != 1500.0 || first["llm_call_index"] != 1.0 || first["caller"] != "lead_agent" {
			t.Errorf("first = %v", first)
		}
		if u := first["usage"].(map[string]any); u["total_tokens"] != 15.0 {
			t.Errorf("usage = %v", u)
		}
		if second["latency_ms"] != nil || second["llm_call_index"] != 1.0 || len(second["usage"].(map[string]any)) != 0 {
			t.Errorf("second = %v", second)
		}
		if third["llm_call_index"] != 2.0 || third["caller"] != "subagent:x" || third["latency_ms"] != nil {
			t.Errorf("third = %v", third)
		}
		if c := decode(t, got[0].Content); c["type"] != "ai" || c["tool_calls"] == nil {
			t.Errorf("content = %s", got[0].Content)
		}
	})
}

func TestLLMError(t *testing.T) {
	t.Parallel()
	j, sink := setup(t, journal.Options{})
	j.ChatModelStart(t.Context(), journal.ChatModelStart{CallID: "c1"})
	j.LLMError(t.Context(), "c1", errors.New("rate limited"))
	j.LLMEnd(t.Context(), journal.LLMEnd{CallID: "c1", Generations: []*journal.Message{ai("late", nil, "")}})
	flush(t, j)
	e := sink.ofType(runevents.EventLLMError)
	if len(e) != 1 || string(e[0].Content) != `"rate limited"` || e[0].Category != runevents.CategoryTrace {
		t.Fatalf("llm.error = %v", e)
	}
	if m := decode(t, sink.ofType(runevents.EventLLMAIResponse)[0].Metadata); m["latency_ms"] != nil {
		t.Errorf("latency after error = %v", m["latency_ms"])
	}
}

func TestTokenAccounting(t *testing.T) {
	t.Parallel()
	j, _ := setup(t, journal.Options{})
	ctx := t.Context()
	j.LLMEnd(ctx, journal.LLMEnd{CallID: "a", Generations: []*journal.Message{ai("First", &journal.Usage{InputTokens: 10, OutputTokens: 5, TotalTokens: 15}, "m1")}})
	j.LLMEnd(ctx, journal.LLMEnd{CallID: "b", Generations: []*journal.Message{ai("Second", &journal.Usage{InputTokens: 20, OutputTokens: 10, TotalTokens: 30}, "m2")}})
	s := j.Summary()
	if s.TotalInputTokens != 30 || s.TotalOutputTokens != 15 || s.TotalTokens != 45 || s.LLMCallCount != 2 {
		t.Errorf("totals = %+v", s)
	}
	if s.ByModel["m1"].TotalTokens != 15 || s.ByModel["m2"].TotalTokens != 30 || s.LastAIMessage != "Second" || s.MessageCount != 2 {
		t.Errorf("summary = %+v", s)
	}
}

func TestTokenTotalComputedAndBuckets(t *testing.T) {
	t.Parallel()
	j, _ := setup(t, journal.Options{})
	ctx := t.Context()
	j.LLMEnd(ctx, journal.LLMEnd{CallID: "a", Generations: []*journal.Message{ai("x", &journal.Usage{InputTokens: 100, OutputTokens: 50}, "")}})
	if s := j.Summary(); s.TotalTokens != 150 || s.ByModel["unknown"].TotalTokens != 150 {
		t.Fatalf("computed total: %+v", s)
	}
	j2, _ := setup(t, journal.Options{})
	u := func() *journal.Usage { return &journal.Usage{InputTokens: 10, OutputTokens: 5, TotalTokens: 15} }
	j2.LLMEnd(ctx, journal.LLMEnd{CallID: "l", Generations: []*journal.Message{ai("lead", u(), "")}})
	j2.LLMEnd(ctx, journal.LLMEnd{CallID: "s", Tags: []string{"subagent:r"}, Generations: []*journal.Message{ai("sub", u(), "")}})
	j2.LLMEnd(ctx, journal.LLMEnd{CallID: "m", Tags: []string{"middleware:title"}, Generations: []*journal.Message{ai("title", u(), "")}})
	s := j2.Summary()
	if s.LeadAgentTokens != 15 || s.SubagentTokens != 15 || s.MiddlewareTokens != 15 {
		t.Errorf("buckets = %+v", s)
	}
	if s.LastAIMessage != "lead" || s.MessageCount != 3 {
		t.Errorf("subagent/middleware AI changed the last AI message or were not counted: %+v", s)
	}
}

func TestTokenUsageDisabled(t *testing.T) {
	t.Parallel()
	j, _ := setup(t, journal.Options{DisableTokenUsage: true})
	j.LLMEnd(t.Context(), journal.LLMEnd{CallID: "a", Generations: []*journal.Message{ai("x", &journal.Usage{InputTokens: 1, OutputTokens: 2, TotalTokens: 3}, "m")}})
	j.RecordExternalUsage([]journal.ExternalUsage{{SourceRunID: "s", TotalTokens: 9}})
	s := j.Summary()
	if s.TotalTokens != 0 || s.LLMCallCount != 0 || len(s.ByModel) != 0 || s.MessageCount != 1 {
		t.Errorf("summary = %+v", s)
	}
}

func TestDuplicateLLMEndCountedOnce(t *testing.T) {
	t.Parallel()
	j, sink := setup(t, journal.Options{})
	ctx := t.Context()
	j.ChatModelStart(ctx, journal.ChatModelStart{CallID: "c"})
	j.LLMEnd(ctx, journal.LLMEnd{CallID: "c", Generations: []*journal.Message{ai("answer", nil, "")}})
	j.LLMEnd(ctx, journal.LLMEnd{CallID: "c", Generations: []*journal.Message{ai("answer", &journal.Usage{InputTokens: 10, OutputTokens: 5, TotalTokens: 15}, "m")}})
	j.LLMEnd(ctx, journal.LLMEnd{CallID: "c", Generations: []*journal.Message{ai("answer", &journal.Usage{InputTokens: 10, OutputTokens: 5, TotalTokens: 15}, "m")}})
	flush(t, j)
	s := j.Summary()
	if s.TotalTokens != 15 || s.LLMCallCount != 1 || s.MessageCount != 1 {
		t.Errorf("summary = %+v", s)
	}
	if got := sink.ofType(runevents.EventLLMAIResponse); len(got) != 1 {
		t.Errorf("%d ai responses, want 1", len(got))
	}
}

func TestExternalUsage(t *testing.T) {
	t.Parallel()
	j, _ := setup(t, journal.Options{})
	j.RecordExternalUsage([]journal.ExternalUsage{
		{SourceRunID: "s1", Caller: "subagent:r", ModelName: "m", InputTokens: 3, OutputTokens: 4, CacheReadTokens: 2},
		{SourceRunID: "s1", Caller: "subagent:r", TotalTokens: 100},
		{SourceRunID: "", TotalTokens: 100},
		{SourceRunID: "s2", TotalTokens: 0},
	})
	j.RecordExternalUsage([]journal.ExternalUsage{{SourceRunID: "s2", TotalTokens: 5}})
	s := j.Summary()
	if s.TotalTokens != 12 || s.SubagentTokens != 7 || s.LeadAgentTokens != 5 || s.LLMCallCount != 0 {
		t.Errorf("summary = %+v", s)
	}
	if s.ByModel["m"] != (journal.ModelTokens{InputTokens: 3, OutputTokens: 4, TotalTokens: 7, CacheReadTokens: 2}) || s.ByModel["unknown"].TotalTokens != 5 {
		t.Errorf("by model = %+v", s.ByModel)
	}
}

func TestLastAIText(t *testing.T) {
	t.Parallel()
	j, _ := setup(t, journal.Options{})
	ctx := t.Context()
	list := &journal.Message{Type: "ai", Content: json.RawMessage(`["First", " ", {"type":"text","text":"second"}, {"content":" third"}, 5]`)}
	j.LLMEnd(ctx, journal.LLMEnd{CallID: "a", Generations: []*journal.Message{list}})
	if got := j.Summary().LastAIMessage; got != "First second third" {
		t.Errorf("list text = %q", got)
	}
	j.LLMEnd(ctx, journal.LLMEnd{CallID: "b", Generations: []*journal.Message{{Type: "ai", Content: json.RawMessage(`{"text":"Nested answer"}`)}}})
	j.LLMEnd(ctx, journal.LLMEnd{CallID: "c", Generations: []*journal.Message{{Type: "ai", ToolCalls: []journal.ToolCall{{ID: "t", Name: "x"}}}}})
	if got := j.Summary().LastAIMessage; got != "Nested answer" {
		t.Errorf("object text = %q (a tool-call-only message must not overwrite it)", got)
	}
}

func TestErrorFallback(t *testing.T) {
	t.Parallel()
	j, _ := setup(t, journal.Options{})
	m := ai("Sorry, something failed", nil, "")
	m.AdditionalKwargs = map[string]any{"deerflow_error_fallback": true, "error_reason": "  quota exceeded ", "hide_from_ui": true}
	j.LLMEnd(t.Context(), journal.LLMEnd{CallID: "a", Generations: []*journal.Message{m}})
	if got := j.Summary().ErrorFallback; got != "quota exceeded" {
		t.Errorf("error fallback = %q", got)
	}

	// Another key of that name is not DeerFlow's flag.
	j, _ = setup(t, journal.Options{})
	m = ai("An answer", nil, "")
	m.AdditionalKwargs = map[string]any{"error_fallback": true, "error_reason": "quota"}
	j.LLMEnd(t.Context(), journal.LLMEnd{CallID: "a", Generations: []*journal.Message{m}})
	if got := j.Summary().ErrorFallback; got != "" {
		t.Errorf("error fallback = %q from additional_kwargs.error_fallback, want none", got)
	}
}

// refusingSink refuses every run row write with err.
type refusingSink struct {
	fakeSink
	err error
}

func (s *refusingSink) PutRun(context.Context, runevents.ThreadRun) error { return s.err }

// TestRunRowProgressSkipsAFinishedRow: a progress write that the row
// refuses because it has finished (CONFLICT) is no failure; another
// refusal is.
func TestRunRowProgressSkipsAFinishedRow(t *testing.T) {
	base := runevents.ThreadRun{ThreadID: "t1", RunID: "r1"}
	finished := journal.RunRowProgress(&refusingSink{err: runstream.Errorf(runstream.CodeConflict, "run r1 is success")}, base)
	if err := finished(t.Context(), journal.Summary{}); err != nil {
		t.Errorf("progress over a finished row: %v, want none", err)
	}
	down := journal.RunRowProgress(&refusingSink{err: errors.New("store down")}, base)
	if err := down(t.Context(), journal.Summary{}); err == nil {
		t.Error("progress with the store down: no error")
	}
}
