package redact

import (
	"encoding/json"
	"strings"
	"testing"
)

// typicalEvent is a ~300-byte agent event without a secret.
const typicalEvent = `{"type":"ai_message","run_id":"run_01J9Z8X7Q2","thread_id":"thr_3f2a9c","seq":42,` +
	`"content":"I checked the repository: the failing test is in store/append_test.go.\nThe fix is to flush pending deltas first.",` +
	`"usage":{"input_tokens":1532,"output_tokens":87,"total_tokens":1619},"latency_ms":812,"model":"gpt-4o-mini",` +
	`"created_at":"2026-03-01T12:34:56.789Z"}`

// secretEvent is typicalEvent with a generated key in its content.
var secretEvent = strings.Replace(typicalEvent, "first.", "first: export OPENAI_API_KEY=sk-"+strings.Repeat("a1B2c3D4", 6)+".", 1)

func benchJSON(b *testing.B, event string, wantChanged bool) {
	r := New(Options{})
	raw := []byte(event)
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		_, changed, err := r.JSON(raw)
		if err != nil || changed != wantChanged {
			b.Fatalf("JSON: changed %v, err %v", changed, err)
		}
	}
}

func benchValue(b *testing.B, event string, wantChanged bool) {
	r := New(Options{})
	var v any
	if err := json.Unmarshal([]byte(event), &v); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, changed := r.Value(v); changed != wantChanged {
			b.Fatalf("Value: changed %v", changed)
		}
	}
}

func BenchmarkJSONNoSecret(b *testing.B)  { benchJSON(b, typicalEvent, false) }
func BenchmarkJSONSecret(b *testing.B)    { benchJSON(b, secretEvent, true) }
func BenchmarkValueNoSecret(b *testing.B) { benchValue(b, typicalEvent, false) }
func BenchmarkValueSecret(b *testing.B)   { benchValue(b, secretEvent, true) }
