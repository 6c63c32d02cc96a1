// Package jsontype describes a JSON decoding type error in the terms of
// the request that caused it (a JSON pointer and JSON kinds), never in
// Go's (struct types, embedded field names), for error answers.
package jsontype

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/runstream/runstream/redact"
)

// Describe says, when err holds a *json.UnmarshalTypeError, which member
// is of the wrong kind and what it must be (`"/a/b" must be a JSON
// string, not number`), the pointer quoted by redact.Quote, or whole (the
// name of the entire document, "the body") in its place when the document
// itself is at fault; ok is false for other errors.
func Describe(err error, whole string) (msg string, ok bool) {
	var typeErr *json.UnmarshalTypeError
	if !errors.As(err, &typeErr) {
		return "", false
	}
	pointer, want, got := Mismatch(typeErr)
	if pointer != "" {
		whole = redact.Quote(pointer)
	}
	return fmt.Sprintf("%s must be a JSON %s, not %s", whole, want, got), true
}

// Mismatch describes e: the JSON pointer of the member at fault ("" for
// the whole document), the kind of JSON value it must be, and the kind it
// was (never the value). The pointer is e.Field, Go's dotted path, less
// the names of embedded Go structs, which the request never names (JSON
// members here start with a lower-case letter or a digit).
func Mismatch(e *json.UnmarshalTypeError) (pointer, want, got string) {
	var b strings.Builder
	if e.Field != "" {
		for _, name := range strings.Split(e.Field, ".") {
			if r, _ := utf8.DecodeRuneInString(name); unicode.IsUpper(r) {
				continue // an embedded struct's Go name
			}
			b.WriteString("/" + strings.ReplaceAll(strings.ReplaceAll(name, "~", "~0"), "/", "~1"))
		}
	}
	got, _, _ = strings.Cut(e.Value, " ") // "number 1e999": the kind only
	if got == "bool" {
		got = "boolean"
	}
	return b.String(), Kind(e.Type), got
}

// Kind names the JSON value a Go type decodes from: object, array,
// string, integer, number, boolean, or value (any JSON value).
func Kind(t reflect.Type) string {
	if t == nil {
		return "value"
	}
	if t == reflect.TypeFor[json.RawMessage]() {
		return "value"
	}
	switch t.Kind() {
	case reflect.Pointer:
		return Kind(t.Elem())
	case reflect.Struct, reflect.Map:
		return "object"
	case reflect.Slice, reflect.Array:
		return "array"
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "integer"
	case reflect.Float32, reflect.Float64:
		return "number"
	}
	return "value"
}
