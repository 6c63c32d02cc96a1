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

func TestDescribe(t *testing.T) {
	var v struct {
		A struct {
			B string `json:"b"`
		} `json:"a"`
	}
	err := json.Unmarshal([]byte(`{"a":{"b":12}}`), &v)
	if msg, ok := Describe(err, "the body"); !ok || msg != `"/a/b" must be a JSON string, not number` {
		t.Errorf("Describe of a member = %q, %t", msg, ok)
	}
	err = json.Unmarshal([]byte(`[1]`), &v)
	if msg, ok := Describe(err, "the body"); !ok || msg != "the body must be a JSON object, not array" {
		t.Errorf("Describe of the document = %q, %t", msg, ok)
	}
	if _, ok := Describe(json.Unmarshal([]byte(`{`), &v), "the body"); ok {
		t.Error("Describe of a syntax error reports a type error")
	}
}
