package engine

import (
	"encoding/json"

	"github.com/runstream/runstream/contracts"
)

// Schema is a user's JSON Schema (inputSchema, formSchema); see
// contracts.Schema.
type Schema = contracts.Schema

// Problem is one place where a value breaks a schema.
type Problem = contracts.Problem

// CompileSchema compiles a user's schema, refusing external references.
func CompileSchema(raw json.RawMessage) (*Schema, error) { return contracts.CompileSchema(raw) }

// shorten bounds a message that may quote part of a value to 200
// characters.
func shorten(s string) string {
	const max = 200
	r := []rune(s)
	if len(r) <= max {
		return s
	}
	return string(r[:max]) + "…"
}
