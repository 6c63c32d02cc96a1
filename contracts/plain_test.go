package contracts

import (
	"bytes"
	"reflect"
	"strings"
	"testing"

	"github.com/runstream/runstream/internal/jsonscan"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

var decodeCorpus = []string{
	`{"chain":"1764612345678901234 xxxx"}`, `{"caller":"bench"}`, ` {"a" : [ 1 , -2.5e3 , true , false , null , "x\n\u00e9" , {} , [] ] } `,
	`""`, `"plain"`, `0`, `-0.0`, `1E+2`, `[]`, `{}`, `[[1],[2,[3]]]`, `{"a":{"b":{"c":"d"}}}`, `"\ud83d\ude00"`, `1e999`,
	`{"a":1,"a":2}`, `{"a\u0062":1}`, `[1,]`, "\"\xff\"", `{} {}`, `nul`,
}

func TestDecodePlainAgreesWithSchemaLibrary(t *testing.T) {
	t.Parallel()
	for _, in := range decodeCorpus {
		checkDecodeAgrees(t, []byte(in))
	}
	if !jsonscan.Plain([]byte(decodeCorpus[0]), maxDecodeDepth) {
		t.Error("Plain refused an event's content: the one-pass decoding is not used")
	}
}

func FuzzDecodePlain(f *testing.F) {
	for _, in := range decodeCorpus {
		f.Add([]byte(in))
	}
	f.Fuzz(func(t *testing.T, b []byte) { checkDecodeAgrees(t, b) })
}

// checkDecodeAgrees checks that decode returns what the schema library's
// decoder returns: the same value, or an error.
func checkDecodeAgrees(t *testing.T, raw []byte) {
	t.Helper()
	got, gotErr := decode(raw)
	want, wantErr := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if (gotErr != nil) != (wantErr != nil) || !reflect.DeepEqual(got, want) {
		t.Errorf("decode(%s) = %#v, %v; the schema library gives %#v, %v", raw, got, gotErr, want, wantErr)
	}
}

func BenchmarkDecode(b *testing.B) {
	raw := []byte(`{"chain":"1764612345678901234 ` + strings.Repeat("x", 150) + `"}`)
	b.Run("library", func(b *testing.B) {
		for b.Loop() {
			if _, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("plain", func(b *testing.B) {
		for b.Loop() {
			if _, err := decode(raw); err != nil {
				b.Fatal(err)
			}
		}
	})
}
