package jsontype

import (
	"encoding/json"
	"errors"
	"testing"
)

// Usage is embedded, as runevents.ThreadRun embeds its usage.
type Usage struct {
	TotalTokens int `json:"total_tokens"`
}

type run struct {
	Status string `json:"status"`
	Usage
	Tags []string `json:"tags"`
}

func TestMismatch(t *testing.T) {
	for _, c := range []struct {
		body, pointer, want, got string
	}{
		{`[]`, "", "object", "array"},
		{`{"total_tokens":"x"}`, "/total_tokens", "integer", "string"},
		{`{"status":1e999}`, "/status", "string", "number"},
		{`{"tags":[true]}`, "/tags", "string", "boolean"},
		{`{"tags":{}}`, "/tags", "array", "object"},
	} {
		var v run
		var e *json.UnmarshalTypeError
		if err := json.Unmarshal([]byte(c.body), &v); !errors.As(err, &e) {
			t.Fatalf("%s: %v, want a type error", c.body, err)
		}
		pointer, want, got := Mismatch(e)
		if pointer != c.pointer || want != c.want || got != c.got {
			t.Errorf("%s: %q, %q, %q; want %q, %q, %q", c.body, pointer, want, got, c.pointer, c.want, c.got)
		}
	}
}
