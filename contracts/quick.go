package contracts

import (
	"bytes"
	"encoding/json"

	"github.com/runstream/runstream/internal/jsonscan"
)

// quickSchema is a schema of the catalogue written with only the keywords
// most of its run event schemas use (type without "integer", const of a
// string without escapes, true, false or null, required, properties,
// additionalProperties true, and annotations), checked on the raw JSON of
// a value without decoding it. It only ever accepts: a value it finds
// invalid, or cannot tell about, goes to the schema library, which
// decides and says why. So it changes no answer, and the ingest path
// skips the decoding and the library for the events it accepts.
type quickSchema struct {
	anything   bool      // true or {}: every value
	types      jsonTypes // the allowed types; 0 for any
	constant   []byte    // the const value's JSON text, or nil
	required   []string
	properties map[string]*quickSchema
}

// jsonTypes is a set of JSON types, one bit each.
type jsonTypes uint8

const (
	typeNull jsonTypes = 1 << iota
	typeBoolean
	typeNumber
	typeString
	typeArray
	typeObject
)

var typeNames = map[string]jsonTypes{
	"null": typeNull, "boolean": typeBoolean, "number": typeNumber,
	"string": typeString, "array": typeArray, "object": typeObject,
}

// compileQuick returns the quick form of the schema raw, or nil when raw
// uses anything else.
func compileQuick(raw json.RawMessage) *quickSchema {
	raw = bytes.TrimSpace(raw)
	if string(raw) == "true" {
		return &quickSchema{anything: true}
	}
	var members map[string]json.RawMessage
	if json.Unmarshal(raw, &members) != nil {
		return nil
	}
	q := &quickSchema{anything: len(members) == 0}
	for key, value := range members {
		switch key {
		case "description", "title", "$comment":
		case "type":
			if q.types = quickTypes(value); q.types == 0 {
				return nil
			}
		case "const":
			if q.constant = quickConst(value); q.constant == nil {
				return nil
			}
		case "required":
			if json.Unmarshal(value, &q.required) != nil {
				return nil
			}
		case "properties":
			var props map[string]json.RawMessage
			if json.Unmarshal(value, &props) != nil {
				return nil
			}
			q.properties = make(map[string]*quickSchema, len(props))
			for name, sub := range props {
				if q.properties[name] = compileQuick(sub); q.properties[name] == nil {
					return nil
				}
			}
		case "additionalProperties":
			if string(bytes.TrimSpace(value)) != "true" {
				return nil
			}
		default:
			return nil
		}
	}
	return q
}

// quickTypes reads a type keyword's value: a name or a list of names,
// "integer" excluded (whether 1.0 is one is the library's to say). It
// returns 0 when it cannot.
func quickTypes(value json.RawMessage) jsonTypes {
	var names []string
	var one string
	if json.Unmarshal(value, &one) == nil {
		names = []string{one}
	} else if json.Unmarshal(value, &names) != nil || len(names) == 0 {
		return 0
	}
	var types jsonTypes
	for _, name := range names {
		t, ok := typeNames[name]
		if !ok {
			return 0
		}
		types |= t
	}
	return types
}

// quickConst returns the JSON text a value must be to equal the const
// value: true, false, null or a string without escapes; nil otherwise.
func quickConst(value json.RawMessage) []byte {
	value = bytes.TrimSpace(value)
	switch string(value) {
	case "true", "false", "null":
		return value
	}
	if _, ok := jsonscan.String(value); ok {
		return value
	}
	return nil
}

// typeOf returns the type of the JSON value that starts value.
func typeOf(value []byte) jsonTypes {
	switch value[0] {
	case '{':
		return typeObject
	case '[':
		return typeArray
	case '"':
		return typeString
	case 't', 'f':
		return typeBoolean
	case 'n':
		return typeNull
	}
	return typeNumber
}

// accepts reports whether value, JSON that jsonscan.Plain accepted
// without surrounding white space, is valid under q; false also when it
// cannot tell.
func (q *quickSchema) accepts(value []byte) bool {
	if q.anything {
		return true
	}
	if len(value) == 0 {
		return false
	}
	t := typeOf(value)
	if q.types != 0 && q.types&t == 0 {
		return false
	}
	if q.constant != nil && !bytes.Equal(value, q.constant) {
		return false // a string with escapes may still equal it: the library says
	}
	if t != typeObject || len(q.required)+len(q.properties) == 0 {
		return true
	}
	found := 0
	ok := jsonscan.Members(value, func(name, member []byte) bool {
		// Plain allows no escaped and no repeated names: name is the
		// member's name, and each is met once.
		if len(q.required) > 0 && isRequired(q.required, name) {
			found++
		}
		if sub := q.properties[string(name)]; sub != nil {
			return sub.accepts(member)
		}
		return true
	})
	return ok && found == len(q.required)
}

func isRequired(required []string, name []byte) bool {
	for _, r := range required {
		if r == string(name) {
			return true
		}
	}
	return false
}

// quickAccepts reports whether v, an event's content or metadata, is
// valid under q without the schema library: v is JSON that
// jsonscan.Plain accepts and q, when not nil, accepts it.
func quickAccepts(q *quickSchema, v any) bool {
	raw, ok := v.(json.RawMessage)
	if !ok || q == nil || !jsonscan.Plain(raw, maxDecodeDepth) {
		return false
	}
	return q.accepts(bytes.TrimSpace(raw))
}
