package subagent_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/runstream/runstream/runevents"
	"github.com/runstream/runstream/subagent"
)

func mapChunk(t *testing.T, chunk string) (runevents.NewEvent, bool, error) {
	t.Helper()
	return subagent.Map("t1", "r1", json.RawMessage(chunk))
}

func content(t *testing.T, e runevents.NewEvent) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(e.Content, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestMalformedChunksRejected(t *testing.T) {
	t.Parallel()
	for _, chunk := range []string{
		`{"type":"task_started","description":"x"}`,
		`{"type":"task_started","task_id":"","description":"x"}`,
		`{"type":"task_started","task_id":7}`,
		`{"type":"task_started","task_id":"t","description":42}`,
		`{"type":"task_running","task_id":"t","message":{"type":"ai"}}`,
		`{"type":"task_running","task_id":"t","message_index":-1,"message":{"type":"ai"}}`,
		`{"type":"task_running","task_id":"t","message_index":true,"message":{"type":"ai"}}`,
		`{"type":"task_running","task_id":"t","message_index":1.0,"message":{"type":"ai"}}`,
		`{"type":"task_running","task_id":"t","message_index":"1","message":{"type":"ai"}}`,
		`{"type":"task_running","task_id":"t","message_index":1,"message":"hello"}`,
		`{"type":"task_running","task_id":"t","message_index":1}`,
		`{"type":"task_completed","result":"done"}`,
		`[1,2]`,
		`"task_started"`,
		`not json`,
	} {
		_, ok, err := mapChunk(t, chunk)
		if ok || !errors.Is(err, subagent.ErrMalformed) {
			t.Errorf("%s: ok %v, err %v; want ErrMalformed", chunk, ok, err)
		}
	}
}

func TestNonTaskChunksIgnored(t *testing.T) {
	t.Parallel()
	for _, chunk := range []string{
		`{"type":"progress","task_id":"t"}`,
		`{"type":"task_polling_timed_out","task_id":"t"}`,
		`{"type":5,"task_id":"t"}`,
		`{"task_id":"t"}`,
	} {
		_, ok, err := mapChunk(t, chunk)
		if ok || err != nil {
			t.Errorf("%s: ok %v, err %v; want ignored", chunk, ok, err)
		}
	}
}

func TestStart(t *testing.T) {
	t.Parallel()
	e, ok, err := mapChunk(t, `{"type":"task_started","task_id":"call-1","description":"Research","model_name":"m"}`)
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	if e.EventType != runevents.EventSubagentStart || e.Category != runevents.CategorySubagent ||
		string(e.Content) != `{"description":"Research","task_id":"call-1"}` || string(e.Metadata) != `{"task_id":"call-1"}` {
		t.Errorf("event = %s %s %s", e.EventType, e.Content, e.Metadata)
	}
	e, _, _ = mapChunk(t, `{"type":"task_started","task_id":"call-1"}`)
	if string(e.Content) != `{"description":null,"task_id":"call-1"}` {
		t.Errorf("without description: %s", e.Content)
	}
}

func TestEnd(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("é", subagent.MaxText+5)
	for _, tc := range []struct {
		chunk string
		want  string
	}{
		{`{"type":"task_completed","task_id":"t","result":"done","model_name":"  m1 ","usage":{"input_tokens":1,"output_tokens":2,"total_tokens":3,"extra":9}}`,
			`{"model_name":"m1","result":"done","status":"completed","task_id":"t","usage":{"input_tokens":1,"output_tokens":2,"total_tokens":3}}`},
		{`{"type":"task_failed","task_id":"t","error":"boom","model_name":"  ","usage":{"input_tokens":1,"output_tokens":true,"total_tokens":3}}`,
			`{"error":"boom","status":"failed","task_id":"t"}`},
		{`{"type":"task_cancelled","task_id":"t","error":null,"usage":{"input_tokens":1,"output_tokens":-2,"total_tokens":3}}`,
			`{"status":"cancelled","task_id":"t"}`},
		{`{"type":"task_timed_out","task_id":"t"}`, `{"status":"timed_out","task_id":"t"}`},
		{`{"type":"task_completed","task_id":"t","result":""}`, `{"result":"","status":"completed","task_id":"t"}`},
		{`{"type":"task_completed","task_id":"t","result":{"a":1}}`, `{"result":"{\"a\":1}","status":"completed","task_id":"t"}`},
	} {
		e, ok, err := mapChunk(t, tc.chunk)
		if err != nil || !ok || e.EventType != runevents.EventSubagentEnd {
			t.Fatalf("%s: %v %v %s", tc.chunk, ok, err, e.EventType)
		}
		if string(e.Content) != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.chunk, e.Content, tc.want)
		}
	}
	raw, _ := json.Marshal(map[string]any{"type": "task_failed", "task_id": "t", "error": long})
	e, _, _ := subagent.Map("t1", "r1", raw)
	c := content(t, e)
	if n := utf8.RuneCountInString(c["error"].(string)); n != subagent.MaxText || c["error_truncated"] != true {
		t.Errorf("error of %d runes, truncated %v", n, c["error_truncated"])
	}
	raw, _ = json.Marshal(map[string]any{"type": "task_completed", "task_id": "t", "result": strings.Repeat("é", subagent.MaxText)})
	e, _, _ = subagent.Map("t1", "r1", raw)
	if c := content(t, e); c["result_truncated"] != nil || utf8.RuneCountInString(c["result"].(string)) != subagent.MaxText {
		t.Errorf("a result of exactly %d runes was cut", subagent.MaxText)
	}
}

func TestStep(t *testing.T) {
	t.Parallel()
	e, ok, err := mapChunk(t, `{"type":"task_running","task_id":"t","message_index":1,"total_messages":3,
		"message":{"type":"ai","content":["a","",{"type":"text","text":"b"},{"type":"image"}],
		"tool_calls":[{"id":"x","type":"tool_call","name":"search","args":{"q":"go"}}]}}`)
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	if e.EventType != runevents.EventSubagentStep || string(e.Metadata) != `{"message_index":1,"task_id":"t"}` {
		t.Errorf("event = %s %s", e.EventType, e.Metadata)
	}
	want := `{"kind":"ai","message_index":1,"task_id":"t","text":"a\nb","tool_calls":[{"args":{"q":"go"},"name":"search"}],"truncated":false}`
	if string(e.Content) != want {
		t.Errorf("ai step:\n got %s\nwant %s", e.Content, want)
	}
	e, _, _ = mapChunk(t, `{"type":"task_running","task_id":"t","message_index":0,"message":{"type":"tool","name":"search","content":"found"}}`)
	if want := `{"kind":"tool","message_index":0,"task_id":"t","text":"found","tool_name":"search","truncated":false}`; string(e.Content) != want {
		t.Errorf("tool step:\n got %s\nwant %s", e.Content, want)
	}
	e, _, _ = mapChunk(t, `{"type":"task_running","task_id":"t","message_index":2,"message":{"type":"human"}}`)
	if want := `{"kind":"ai","message_index":2,"task_id":"t","text":"","tool_calls":[],"truncated":false}`; string(e.Content) != want {
		t.Errorf("other step:\n got %s\nwant %s", e.Content, want)
	}
	e, _, _ = mapChunk(t, `{"type":"task_running","task_id":"t","message_index":2,"message":{"type":"tool","content":null}}`)
	if c := content(t, e); c["tool_name"] != nil || c["text"] != "" {
		t.Errorf("tool step without name: %s", e.Content)
	}
}

func TestStepTruncation(t *testing.T) {
	t.Parallel()
	text := strings.Repeat("世", subagent.MaxText+1)
	// {"k": "<v>"}: 9 characters of JSON around v, with the original's spacing
	argsFits := map[string]any{"k": strings.Repeat("ü", subagent.MaxText-9)}
	argsOver := map[string]any{"k": strings.Repeat("ü", subagent.MaxText-8)}
	raw, _ := json.Marshal(map[string]any{"type": "task_running", "task_id": "t", "message_index": 1,
		"message": map[string]any{"type": "ai", "content": text, "tool_calls": []any{
			map[string]any{"name": "fits", "args": argsFits},
			map[string]any{"name": "over", "args": argsOver},
			map[string]any{"name": "string", "args": strings.Repeat("x", subagent.MaxText+1)},
		}}})
	e, ok, err := subagent.Map("t1", "r1", raw)
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	c := content(t, e)
	if utf8.RuneCountInString(c["text"].(string)) != subagent.MaxText || c["truncated"] != true {
		t.Errorf("text not cut to %d runes", subagent.MaxText)
	}
	calls := c["tool_calls"].([]any)
	fits, over, str := calls[0].(map[string]any), calls[1].(map[string]any), calls[2].(map[string]any)
	if _, isObj := fits["args"].(map[string]any); !isObj || fits["args_truncated"] != nil {
		t.Errorf("args of exactly %d characters were cut: %v", subagent.MaxText, fits["args_truncated"])
	}
	s, isStr := over["args"].(string)
	if !isStr || over["args_truncated"] != true || utf8.RuneCountInString(s) != subagent.MaxText || !strings.HasPrefix(s, `{"k": "üü`) {
		t.Errorf("args over the limit: truncated %v, %d runes", over["args_truncated"], utf8.RuneCountInString(s))
	}
	if s, _ := str["args"].(string); str["args_truncated"] != true || len(s) != subagent.MaxText {
		t.Errorf("string args over the limit: %v", str["args_truncated"])
	}
}

type fakeAppender struct {
	batches [][]runevents.NewEvent
	fail    int
}

func (a *fakeAppender) Append(ctx context.Context, events []runevents.NewEvent) error {
	if a.fail > 0 {
		a.fail--
		return errors.New("store down")
	}
	a.batches = append(a.batches, append([]runevents.NewEvent(nil), events...))
	return nil
}

func step(i int) json.RawMessage {
	raw, _ := json.Marshal(map[string]any{"type": "task_running", "task_id": "t", "message_index": i,
		"message": map[string]any{"type": "ai", "content": "step"}})
	return raw
}

func TestWriterBatches(t *testing.T) {
	t.Parallel()
	app := &fakeAppender{}
	w := subagent.NewWriter(app, "t1", "r1", nil)
	ctx := t.Context()
	if err := w.Add(ctx, json.RawMessage(`{"type":"task_started","task_id":"t","description":"d"}`)); err != nil {
		t.Fatal(err)
	}
	for i := range 23 {
		if err := w.Add(ctx, step(i)); err != nil {
			t.Fatal(err)
		}
	}
	if len(app.batches) != 0 {
		t.Fatal("wrote before 25 events")
	}
	if err := w.Add(ctx, step(23)); err != nil {
		t.Fatal(err)
	}
	if len(app.batches) != 1 || len(app.batches[0]) != 25 {
		t.Fatalf("batches = %d", len(app.batches))
	}
	if err := w.Add(ctx, json.RawMessage(`{"type":"task_running","task_id":"t"}`)); !errors.Is(err, subagent.ErrMalformed) {
		t.Fatalf("malformed chunk: %v", err)
	}
	if err := w.Add(ctx, step(24)); err != nil {
		t.Fatal(err)
	}
	app.fail = 1
	if err := w.Add(ctx, json.RawMessage(`{"type":"task_completed","task_id":"t","result":"r"}`)); err != nil {
		t.Fatalf("a failed write was reported to Add: %v", err)
	}
	if w.Pending() != 2 {
		t.Fatalf("pending = %d after a failed write, want 2", w.Pending())
	}
	if err := w.Add(ctx, json.RawMessage(`{"type":"task_started","task_id":"u"}`)); err != nil {
		t.Fatal(err)
	}
	app.fail = 1
	if err := w.Flush(ctx); err == nil {
		t.Fatal("Flush hid the failure")
	}
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	last := app.batches[len(app.batches)-1]
	if len(last) != 3 || last[0].EventType != runevents.EventSubagentStep || last[1].EventType != runevents.EventSubagentEnd || last[2].EventType != runevents.EventSubagentStart {
		t.Fatalf("last batch = %v", last)
	}
}
