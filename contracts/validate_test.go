package contracts_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/contracts"
	"github.com/runstream/runstream/workflow"
)

// requiredPaths lists the JSON Pointers of every property that schema makes
// required and value holds, descending into properties, array items, $ref and
// allOf if/then conditions, as found in the contract.
func requiredPaths(t testing.TB, root map[string]any, schema, value any, at string) []string {
	t.Helper()
	s, ok := schema.(map[string]any)
	if !ok {
		return nil // boolean schema
	}
	if ref, ok := s["$ref"].(string); ok {
		return requiredPaths(t, root, resolve(t, root, ref), value, at)
	}
	var out []string
	switch value := value.(type) {
	case map[string]any:
		if req, ok := s["required"].([]any); ok {
			for _, name := range req {
				if _, present := value[name.(string)]; present {
					out = append(out, at+"/"+name.(string))
				}
			}
		}
		if all, ok := s["allOf"].([]any); ok {
			for _, sub := range all {
				sub := sub.(map[string]any)
				if ifMatches(t, sub["if"], value) {
					out = append(out, requiredPaths(t, root, sub["then"], value, at)...)
				}
			}
		}
		if props, ok := s["properties"].(map[string]any); ok {
			for name, sub := range props {
				if v, present := value[name]; present {
					out = append(out, requiredPaths(t, root, sub, v, at+"/"+name)...)
				}
			}
		}
	case []any:
		if items, ok := s["items"]; ok {
			for i, v := range value {
				out = append(out, requiredPaths(t, root, items, v, at+"/"+strconv.Itoa(i))...)
			}
		}
	}
	return out
}

// ifMatches evaluates the only "if" form the contracts use: properties whose
// schemas are {"const": …}. Any other form fails the test, so a new contract
// construct gets noticed here.
func ifMatches(t testing.TB, cond any, value map[string]any) bool {
	t.Helper()
	c, ok := cond.(map[string]any)
	if !ok || len(c) != 1 || c["properties"] == nil {
		t.Fatalf("unsupported if schema %v", cond)
	}
	for name, sub := range c["properties"].(map[string]any) {
		want, ok := sub.(map[string]any)["const"]
		if !ok {
			t.Fatalf("unsupported if schema %v", cond)
		}
		if got, present := value[name]; present && fmt.Sprint(got) != fmt.Sprint(want) {
			return false
		}
	}
	return true
}

func resolve(t testing.TB, root map[string]any, ref string) any {
	t.Helper()
	ptr, ok := strings.CutPrefix(ref, "#")
	if !ok {
		t.Fatalf("unsupported $ref %q", ref)
	}
	return lookup(t, root, ptr)
}

func lookup(t testing.TB, doc any, ptr string) any {
	t.Helper()
	for _, tok := range tokens(ptr) {
		switch d := doc.(type) {
		case map[string]any:
			doc = d[tok]
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i >= len(d) {
				t.Fatalf("bad pointer %q", ptr)
			}
			doc = d[i]
		default:
			t.Fatalf("bad pointer %q", ptr)
		}
	}
	return doc
}

func tokens(ptr string) []string {
	if ptr == "" {
		return nil
	}
	return strings.Split(strings.TrimPrefix(ptr, "/"), "/")
}

// edit returns a copy of the JSON document raw with the value at ptr
// replaced by val, or removed when remove is set.
func edit(t testing.TB, raw []byte, ptr string, val any, remove bool) []byte {
	t.Helper()
	doc := decodeJSON(t, raw)
	cut := strings.LastIndexByte(ptr, '/')
	parent, last := lookup(t, doc, ptr[:cut]), ptr[cut+1:]
	switch p := parent.(type) {
	case map[string]any:
		if remove {
			delete(p, last)
		} else {
			p[last] = val
		}
	case []any:
		i, err := strconv.Atoi(last)
		if err != nil || remove {
			t.Fatalf("cannot edit %q", ptr)
		}
		p[i] = val
	default:
		t.Fatalf("cannot edit %q", ptr)
	}
	return mustMarshal(t, doc)
}

func problemPaths(t testing.TB, err error) []string {
	t.Helper()
	var verr *contracts.ValidationError
	if !errors.As(err, &verr) {
		t.Fatalf("error %v (%T) is not a *ValidationError", err, err)
	}
	if len(verr.Problems) == 0 {
		t.Fatalf("ValidationError without problems")
	}
	return verr.Paths()
}

// TestRemovingRequiredFieldFails removes, one at a time, every required
// property the fixtures hold (of the envelope or record, and of data,
// content and metadata at any depth) and expects a problem at its path.
func TestRemovingRequiredFieldFails(t *testing.T) {
	t.Parallel()
	v := newValidator(t)
	c := loadContracts(t)
	type check func([]byte) error
	sets := []struct {
		fixtures []fixture
		validate check
	}{
		{workflowFixtures(t, c), v.ValidateWorkflowEnvelope},
		{runEventFixtures(t, c), v.ValidateRunEventRecord},
	}
	total := 0
	for _, set := range sets {
		for _, f := range set.fixtures {
			doc := decodeJSON(t, f.raw)
			var paths []string
			for at, schema := range f.schemas {
				paths = append(paths, requiredPaths(t, f.root, schema, lookup(t, doc, at), at)...)
			}
			slices.Sort(paths)
			if len(paths) == 0 {
				t.Fatalf("%s: no required property found", f.name)
			}
			total += len(paths)
			for _, p := range paths {
				t.Run(f.name+p, func(t *testing.T) {
					t.Parallel()
					err := set.validate(edit(t, f.raw, p, nil, true))
					if err == nil {
						t.Fatalf("valid without %s", p)
					}
					if got := problemPaths(t, err); !slices.Contains(got, p) {
						t.Fatalf("problems at %v, want one at %s (%v)", got, p, err)
					}
				})
			}
		}
	}
	// The envelope alone has 10 required fields in each of 19 fixtures.
	if total < 190 {
		t.Fatalf("only %d required properties checked", total)
	}
}

func TestWrongValueFails(t *testing.T) {
	t.Parallel()
	v := newValidator(t)
	long := strings.Repeat("x", 22)
	tests := []struct {
		fixture string // in fixtures/
		ptr     string
		val     any
		want    string // a problem path
	}{
		{"workflow/node.output.delta.json", "/seq", "42", "/seq"},
		{"workflow/node.output.delta.json", "/seq", 0, "/seq"},
		{"workflow/node.output.delta.json", "/seq", 1.5, "/seq"},
		{"workflow/node.output.delta.json", "/schemaVersion", "1.1", "/schemaVersion"},
		{"workflow/node.output.delta.json", "/runId", "", "/runId"},
		{"workflow/node.output.delta.json", "/timestamp", "2026-08-26T02:00:00Z", "/timestamp"},
		{"workflow/node.output.delta.json", "/timestamp", "2026-13-26T10:00:00+08:00", "/timestamp"},
		{"workflow/node.output.delta.json", "/unknownField", true, "/unknownField"},
		{"workflow/node.output.delta.json", "/data", "Hello", "/data"},
		{"workflow/node.output.delta.json", "/data/delta", 5, "/data/delta"},
		{"workflow/node.output.delta.json", "/data/extra", "x", "/data/extra"},
		{"workflow/node.output.delta.json", "/nodeId", nil, "/nodeId"},
		{"workflow/node.output.delta.json", "/nodeRunId", "", "/nodeRunId"},
		{"workflow/run.created.json", "/nodeId", "agent_writer", "/nodeId"},
		{"workflow/run.created.json", "/nodeRunId", 9, "/nodeRunId"},
		{"workflow/run.created.json", "/data/version", 0, "/data/version"},
		{"workflow/run.started.json", "/data/startedAt", "yesterday", "/data/startedAt"},
		{"workflow/node.failed.json", "/data/error/retryable", "yes", "/data/error/retryable"},
		{"workflow/node.failed.json", "/data/error/hint", "x", "/data/error/hint"},
		{"workflow/node.failed.json", "/data/error/code", "timeout", "/data/error/code"},
		{"workflow/node.tool.finished.json", "/data/status", "done", "/data/status"},
		{"workflow/run.completed.json", "/data/artifacts/0/sha256", "abc", "/data/artifacts/0/sha256"},
		{"workflow/run.awaiting_input.json", "/data/actions", []any{}, "/data/actions"},
		{"workflow/run.awaiting_input.json", "/data/actions", []any{"approve", "approve"}, "/data/actions"},
		{"workflow/node.progress.json", "/data/percent", 101, "/data/percent"},
		{"run_events/run.start.json", "/seq", "1", "/seq"},
		{"run_events/run.start.json", "/seq", 0, "/seq"},
		{"run_events/run.start.json", "/category", "message", "/category"},
		{"run_events/run.start.json", "/created_at", "yesterday", "/created_at"},
		{"run_events/run.start.json", "/metadata", "lead_agent", "/metadata"},
		{"run_events/run.start.json", "/event_type", "run.begin", "/event_type"},
		{"run_events/run.start.json", "/event_type", strings.Repeat("r", 33), "/event_type"},
		{"run_events/run.start.json", "/content/chain", 7, "/content/chain"},
		{"run_events/run.error.json", "/content", map[string]any{"error": "x"}, "/content"},
		{"run_events/run.end.json", "/metadata/status", "error", "/metadata/status"},
		{"run_events/context_memory.json", "/content/content_sha256", strings.Repeat("A", 64), "/content/content_sha256"},
		{"run_events/subagent.step.json", "/content/kind", "system", "/content/kind"},
		{"run_events/subagent.step.json", "/content/message_index", -1, "/content/message_index"},
		{"run_events/subagent.end.json", "/content/status", "done", "/content/status"},
		{"run_events/run.delivery.json", "/content/stage", "late", "/content/stage"},
		{"run_events/llm.ai.response.json", "/metadata/llm_call_index", 0, "/metadata/llm_call_index"},
		{"run_events/workspace_changes.json", "/metadata/workspace_changes/files/0/status", "renamed", "/metadata/workspace_changes/files/0/status"},
		{"run_events/workspace_changes.json", "/metadata/workspace_changes/version", 2, "/metadata/workspace_changes/version"},
		{"run_events/middleware_guardrail.json", "/event_type", "middleware:", "/event_type"},
		{"run_events/middleware_guardrail.json", "/event_type", "middleware:" + long, "/event_type"},
		{"run_events/middleware_guardrail.json", "/category", "trace", "/category"},
		{"run_events/middleware_guardrail.json", "/content/changes", []any{}, "/content/changes"},
		{"run_events/ai_message.json", "/category", "trace", "/category"},
		{"run_events/ai_message.json", "/content/type", "human", "/content/type"},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s%s=%v", tt.fixture, tt.ptr, tt.val), func(t *testing.T) {
			t.Parallel()
			raw, err := fs.ReadFile(contracts.FS(), "fixtures/"+tt.fixture)
			if err != nil {
				t.Fatal(err)
			}
			validate := v.ValidateRunEventRecord
			if strings.HasPrefix(tt.fixture, "workflow/") {
				validate = v.ValidateWorkflowEnvelope
			}
			err = validate(edit(t, raw, tt.ptr, tt.val, false))
			if err == nil {
				t.Fatal("valid")
			}
			if got := problemPaths(t, err); !slices.Contains(got, tt.want) {
				t.Fatalf("problems at %v, want one at %s (%v)", got, tt.want, err)
			}
		})
	}
}

func TestMiddlewareTagsWithinLimits(t *testing.T) {
	t.Parallel()
	v := newValidator(t)
	raw, err := fs.ReadFile(contracts.FS(), "fixtures/run_events/middleware_guardrail.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, tag := range []string{"a", "skill_secrets", strings.Repeat("t", 21), strings.Repeat("é", 21)} {
		if err := v.ValidateRunEventRecord(edit(t, raw, "/event_type", "middleware:"+tag, false)); err != nil {
			t.Errorf("tag %q: %v", tag, err)
		}
	}
}

func TestUnknownWorkflowEventFails(t *testing.T) {
	t.Parallel()
	v := newValidator(t)
	raw, err := fs.ReadFile(contracts.FS(), "fixtures/workflow/node.output.delta.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, event := range []string{"node.output.deltas", "run.paused", "", "NODE.OUTPUT.DELTA"} {
		err := v.ValidateWorkflowEnvelope(edit(t, raw, "/event", event, false))
		if got := problemPaths(t, err); !slices.Contains(got, "/event") {
			t.Errorf("event %q: problems at %v, want /event", event, got)
		}
		if err := v.ValidateWorkflowData(event, map[string]any{"channel": "text", "delta": "x"}); err == nil {
			t.Errorf("ValidateWorkflowData(%q) = nil", event)
		}
	}
}

func TestNotAnObjectFails(t *testing.T) {
	t.Parallel()
	v := newValidator(t)
	for _, raw := range []string{"", "{", "[]", "null", "42", `"x"`, "{} {}", `{"event":"run.created"`} {
		if err := v.ValidateWorkflowEnvelope([]byte(raw)); err == nil {
			t.Errorf("ValidateWorkflowEnvelope(%q) = nil", raw)
		} else {
			problemPaths(t, err)
		}
		if err := v.ValidateRunEventRecord([]byte(raw)); err == nil {
			t.Errorf("ValidateRunEventRecord(%q) = nil", raw)
		} else {
			problemPaths(t, err)
		}
	}
}

type outputDelta struct {
	Channel string `json:"channel"`
	Delta   string `json:"delta"`
}

func TestValidateWorkflowDataForms(t *testing.T) {
	t.Parallel()
	v := newValidator(t)
	var fromUnmarshal any
	if err := json.Unmarshal([]byte(`{"attempt":2,"inputSummary":{"n":1.5}}`), &fromUnmarshal); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		event string
		data  any
		want  []string // problem paths; nil means valid
	}{
		{"json.Unmarshal float64", "node.started", fromUnmarshal, nil},
		{"raw message", "node.output.delta", json.RawMessage(`{"channel":"text","delta":"Hi"}`), nil},
		{"struct", "node.output.delta", outputDelta{Channel: "text", Delta: "Hi"}, nil},
		{"Go ints", "node.completed", map[string]any{"durationMs": int64(12), "attempt": 1}, nil},
		{"float attempt", "node.started", map[string]any{"attempt": 1.5}, []string{"/attempt"}},
		{"empty channel", "node.output.delta", outputDelta{Delta: "Hi"}, []string{"/channel"}},
		{"missing", "run.queued", map[string]any{}, []string{"/queue"}},
		{"bad raw", "node.output.delta", json.RawMessage(`{"channel":`), []string{""}},
		{"not JSON", "node.output.delta", map[string]any{"channel": make(chan int)}, []string{""}},
		{"nil", "run.queued", nil, []string{""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := v.ValidateWorkflowData(tt.event, tt.data)
			if tt.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil {
				t.Fatal("valid")
			}
			if got := problemPaths(t, err); !slices.Equal(got, tt.want) {
				t.Fatalf("problems at %v, want %v (%v)", got, tt.want, err)
			}
		})
	}
}

// TestValidateRunEventFixtures feeds every run-event fixture's content and
// metadata to the ingest check, as json.Unmarshal into any decodes them.
func TestValidateRunEventFixtures(t *testing.T) {
	t.Parallel()
	v := newValidator(t)
	for _, f := range runEventFixtures(t, loadContracts(t)) {
		var rec struct {
			EventType string `json:"event_type"`
			Content   any    `json:"content"`
			Metadata  any    `json:"metadata"`
		}
		if err := json.Unmarshal(f.raw, &rec); err != nil {
			t.Fatal(err)
		}
		if err := v.ValidateRunEvent(rec.EventType, rec.Content, rec.Metadata); err != nil {
			t.Errorf("%s: %v", f.name, err)
		}
	}
}

var aiContent = map[string]any{"type": "ai", "content": "x", "tool_calls": []any{}}

// TestValidateRunEventSeedsAndLegacyRows accepts the AI rows DeerFlow's
// history seeds write (caller and seed markers, no usage, latency_ms or
// llm_call_index) and the legacy ai_message rows of its old journal
// (metadata {model_name, finish_reason}).
func TestValidateRunEventSeedsAndLegacyRows(t *testing.T) {
	t.Parallel()
	v := newValidator(t)
	for _, tt := range []struct {
		name      string
		eventType string
		metadata  map[string]any
	}{
		{"branch seed", "llm.ai.response", map[string]any{"caller": "lead_agent", "branch_seed": true, "branch_parent_thread_id": "t0"}},
		{"checkpoint seed", "llm.ai.response", map[string]any{"caller": "lead_agent", "checkpoint_history_seed": true}},
		{"legacy alias", "ai_message", map[string]any{"model_name": "gpt-4o", "finish_reason": "stop"}},
		{"legacy alias, no metadata", "ai_message", map[string]any{}},
	} {
		if err := v.ValidateRunEvent(tt.eventType, aiContent, tt.metadata); err != nil {
			t.Errorf("%s: %v", tt.name, err)
		}
	}
}

func TestValidateRunEventFails(t *testing.T) {
	t.Parallel()
	v := newValidator(t)
	tests := []struct {
		name      string
		eventType string
		content   any
		metadata  any
		want      []string
	}{
		{"unknown type", "run.begin", map[string]any{}, map[string]any{}, []string{"/event_type"}},
		{"empty middleware tag", "middleware:", map[string]any{}, map[string]any{}, []string{"/event_type"}},
		{"nil metadata", "llm.error", "boom", nil, []string{"/metadata"}},
		{"missing caller", "run.start", map[string]any{"chain": nil}, map[string]any{}, []string{"/metadata/caller"}},
		{"both wrong", "run.error", 42, map[string]any{"error_type": 1}, []string{"/content", "/metadata/error_type"}},
		{"alias as canonical", "ai_message", map[string]any{"type": "ai", "content": "x"}, map[string]any{"caller": "lead_agent", "usage": map[string]any{}, "latency_ms": nil, "llm_call_index": 1}, []string{"/content/tool_calls"}},
		{"middleware content", "middleware:guardrail", map[string]any{"name": "g", "hook": "h", "action": "a"}, map[string]any{}, []string{"/content/changes"}},
		// A journal row (no seed marker) must carry what the LLM call measured.
		{"AI without usage", "llm.ai.response", aiContent, map[string]any{"caller": "lead_agent"}, []string{"/metadata/latency_ms", "/metadata/llm_call_index", "/metadata/usage"}},
		{"AI with a false seed marker", "llm.ai.response", aiContent, map[string]any{"caller": "lead_agent", "branch_seed": false}, []string{"/metadata/latency_ms", "/metadata/llm_call_index", "/metadata/usage"}},
		{"seed without caller", "llm.ai.response", aiContent, map[string]any{"branch_seed": true}, []string{"/metadata/caller"}},
		{"legacy alias caller", "ai_message", aiContent, map[string]any{"caller": 7}, []string{"/metadata/caller"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := v.ValidateRunEvent(tt.eventType, tt.content, tt.metadata)
			if err == nil {
				t.Fatal("valid")
			}
			if got := problemPaths(t, err); !slices.Equal(got, tt.want) {
				t.Fatalf("problems at %v, want %v (%v)", got, tt.want, err)
			}
		})
	}
}

// TestEnvelopeExampleRoundTrip decodes the protocol's example envelope into
// workflow.Envelope and expects json.Marshal to give back the same bytes.
func TestEnvelopeExampleRoundTrip(t *testing.T) {
	t.Parallel()
	raw, err := fs.ReadFile(contracts.FS(), "fixtures/event_envelope_example.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := newValidator(t).ValidateWorkflowEnvelope(raw); err != nil {
		t.Fatal(err)
	}
	var env workflow.Envelope
	if err := json.Unmarshal(raw, &env); err != nil {
		t.Fatal(err)
	}
	if env.RunID != "run_01" || env.WorkflowID != "wf_01" || env.VersionID != "wv_03" || env.Seq != 42 ||
		env.Event != workflow.EventNodeOutputDelta || env.NodeID != "agent_writer" || env.NodeRunID != "nr_09" {
		t.Fatalf("decoded %+v, want the protocol's example values", env)
	}
	var want bytes.Buffer
	if err := json.Compact(&want, raw); err != nil {
		t.Fatal(err)
	}
	got, err := json.Marshal(env)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want.Bytes()) {
		t.Fatalf("round trip:\n got %s\nwant %s", got, want.Bytes())
	}
}

func TestValidationErrorIsCallerSafe(t *testing.T) {
	t.Parallel()
	v := newValidator(t)
	huge := strings.Repeat("Z", 100_000)
	err := v.ValidateRunEvent("context:memory", map[string]any{"content_sha256": huge}, map[string]any{})
	var verr *contracts.ValidationError
	if !errors.As(err, &verr) || len(verr.Problems) != 1 {
		t.Fatalf("err = %v, want one problem", err)
	}
	p := verr.Problems[0]
	if p.Path != "/content/content_sha256" {
		t.Errorf("path = %q", p.Path)
	}
	if n := utf8.RuneCountInString(p.Message); n > 201 {
		t.Errorf("message has %d runes, want it shortened", n)
	}
	if strings.Contains(err.Error(), huge[:1000]) {
		t.Error("Error() echoes the whole value")
	}
	if !strings.Contains(err.Error(), "/content/content_sha256") {
		t.Errorf("Error() = %q, want the path", err.Error())
	}
	b := mustMarshal(t, verr.Problems)
	if !strings.Contains(string(b), `"path":"/content/content_sha256"`) {
		t.Errorf("problems encode as %s", b)
	}
}

// TestValidatorConcurrentUse shares one Validator between goroutines; run
// with -race it proves the compiled schemas are read-only.
func TestValidatorConcurrentUse(t *testing.T) {
	t.Parallel()
	v := newValidator(t)
	c := loadContracts(t)
	wf, re := workflowFixtures(t, c), runEventFixtures(t, c)
	var wg sync.WaitGroup
	errs := make(chan error, 8*(len(wf)+len(re)))
	for range 8 {
		wg.Go(func() {
			for _, f := range wf {
				errs <- v.ValidateWorkflowEnvelope(f.raw)
			}
			for _, f := range re {
				errs <- v.ValidateRunEventRecord(f.raw)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}

func FuzzValidateWorkflowEnvelope(f *testing.F) {
	v := newValidator(f)
	for _, fx := range workflowFixtures(f, loadContracts(f)) {
		f.Add(fx.raw)
	}
	f.Add([]byte(`{"event":"run.created","data":{"version":1e400}}`))
	f.Add([]byte(`{"event":"node.failed","data":{"error":{"code":"\u0000"}},"nodeId":[]}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		err := v.ValidateWorkflowEnvelope(raw)
		if err == nil {
			if !json.Valid(raw) {
				t.Fatalf("accepted invalid JSON %q", raw)
			}
			return
		}
		var verr *contracts.ValidationError
		if !errors.As(err, &verr) || len(verr.Problems) == 0 {
			t.Fatalf("error %v is not a *ValidationError with problems", err)
		}
	})
}

func BenchmarkValidateWorkflowEnvelope(b *testing.B) {
	v := newValidator(b)
	raw, err := fs.ReadFile(contracts.FS(), "fixtures/workflow/run.completed.json")
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if err := v.ValidateWorkflowEnvelope(raw); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkValidateRunEventRecord(b *testing.B) {
	v := newValidator(b)
	raw, err := fs.ReadFile(contracts.FS(), "fixtures/run_events/workspace_changes.json")
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if err := v.ValidateRunEventRecord(raw); err != nil {
			b.Fatal(err)
		}
	}
}

func TestProblemsAreOrdered(t *testing.T) {
	t.Parallel()
	v := newValidator(t)
	content := map[string]any{"presented": -1, "paths": []any{1, 2}, "by_tool": 3, "stage": "x", "satisfied": "yes"}
	first := v.ValidateRunEvent("run.delivery", content, map[string]any{})
	paths := problemPaths(t, first)
	if !slices.IsSorted(paths) || len(paths) < 5 {
		t.Fatalf("paths %v, want at least 5, sorted", paths)
	}
	for range 20 {
		if again := v.ValidateRunEvent("run.delivery", content, map[string]any{}); again.Error() != first.Error() {
			t.Fatalf("validation not deterministic:\n%v\n%v", first, again)
		}
	}
}

// TestValidationErrorBounded: a value that fails its schema in thousands of
// places gets an error that names five paths and carries twenty problems,
// and counts them all.
func TestValidationErrorBounded(t *testing.T) {
	t.Parallel()
	schema, err := contracts.CompileSchema(json.RawMessage(`{"type":"array","items":{"type":"string"}}`))
	if err != nil {
		t.Fatal(err)
	}
	value := "[" + strings.TrimSuffix(strings.Repeat("1,", 5000), ",") + "]"
	e := runstream.AsError(schema.ValidationError(json.RawMessage(value), runstream.CodeWorkflowInputInvalid, "input"))
	if e == nil {
		t.Fatal("no error")
	}
	problems, _ := e.Details["problems"].([]contracts.Problem)
	if len(problems) != contracts.MaxProblems || e.Details["problems_total"] != 5000 {
		t.Errorf("details hold %d problems of %v, want %d of 5000", len(problems), e.Details["problems_total"], contracts.MaxProblems)
	}
	if !strings.HasSuffix(e.Message, " and 4995 more places") || strings.Count(e.Message, "/") != 5 {
		t.Errorf("message %q, want five paths and the count of the others", e.Message)
	}
}
