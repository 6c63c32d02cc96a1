package redact

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
)

// FuzzIdempotent checks that redacting redacted output changes nothing, for
// strings and for JSON documents, that JSON's fast scan never misses a
// change, and that no input makes the rules panic.
func FuzzIdempotent(f *testing.F) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, c := range genSecrets(rng) {
		f.Add(c.Text)
		f.Add("Use " + c.Text + " now.\nAuthorization: Bearer " + c.Text)
		raw, _ := json.Marshal(map[string]any{"content": c.Text, "api_key": c.Text})
		f.Add(string(raw))
	}
	for _, s := range benignStrings(rng) {
		f.Add(s)
	}
	f.Add(`{"content":[{"type":"thinking","thinking":"x","signature":"y"}],"n":1.0}`)
	f.Add(`password=[REDACTED:key]x "token": "[REDACTED:jwt]" Authorization: Basic [REDACTED:key]`)
	f.Add(`{"a":"\u0073k-abcDEF1234567890abcdef","b":"x\ud83d\ude00y","thinking":["t"]}`)

	r := New(Options{})
	f.Fuzz(func(t *testing.T, s string) {
		once, _ := r.String(s)
		twice, changed := r.String(once)
		if changed || twice != once {
			t.Errorf("String not idempotent:\n in    %q\n once  %q\n twice %q", s, once, twice)
		}
		if !json.Valid([]byte(s)) {
			return
		}
		// The fast scan must never miss what the full pass would change.
		if !r.rawMayChange([]byte(s)) {
			dec := json.NewDecoder(strings.NewReader(s))
			dec.UseNumber()
			var v any
			if err := dec.Decode(&v); err != nil {
				t.Fatalf("decode valid JSON %q: %v", s, err)
			}
			if got, changed := r.Value(v); changed {
				t.Errorf("fast scan missed a change:\n in  %s\n got %v", s, got)
			}
		}
		out, _, err := r.JSON([]byte(s))
		if err != nil {
			t.Fatalf("JSON(%q): %v", s, err)
		}
		again, changed, err := r.JSON(out)
		if err != nil || changed || string(again) != string(out) {
			t.Errorf("JSON not idempotent:\n in    %s\n once  %s\n twice %s (%v, %v)", s, out, again, changed, err)
		}
	})
}
