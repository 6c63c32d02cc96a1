package redact_test

import (
	"fmt"

	"github.com/runstream/runstream/redact"
)

func ExampleRedactor_JSON() {
	r := redact.New(redact.Options{})
	event := []byte(`{"content":[{"type":"thinking","thinking":"…"},{"type":"text","text":"connect with postgres://app:hunter2@db.example:5432/app"}],"usage":{"input_tokens":12,"output_tokens":3},"api_key":"abc"}`)
	out, changed, err := r.JSON(event)
	fmt.Println(string(out), changed, err)

	clean := []byte(`{"usage": {"total_tokens": 15}}`)
	out, changed, _ = r.JSON(clean)
	fmt.Println(string(out), changed)
	// Output:
	// {"api_key":"[REDACTED:key]","content":[{"text":"connect with postgres://[REDACTED:dsn]@db.example:5432/app","type":"text"}],"usage":{"input_tokens":12,"output_tokens":3}} true <nil>
	// {"usage": {"total_tokens": 15}} false
}

func ExampleOptions_keepKeys() {
	// The engine's Redactor for run.awaiting_input keeps the resume token.
	awaiting := redact.New(redact.Options{KeepKeys: []string{"resumeToken"}})
	data := map[string]any{"actions": []any{"approve"}, "resumeToken": "q3v…", "password": "pw"}
	out, _ := awaiting.Value(data)
	fmt.Println(out)
	// Output:
	// map[actions:[approve] password:[REDACTED:key] resumeToken:q3v…]
}
