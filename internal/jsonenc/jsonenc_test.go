package jsonenc

import (
	"encoding/json"
	"testing"
)

func TestAppendStringMatchesEncodingJSON(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"", "run_01", "node.output.delta", "a\"b", `back\slash`, "<tag>&", "tab\there", "line\nbreak", "é", "\u2028", "\x7f", "emoji 🎉", "\xff"} {
		want, _ := json.Marshal(s)
		if got := AppendString([]byte("x"), s); string(got) != "x"+string(want) {
			t.Errorf("AppendString(%q) = %s, want %s", s, got[1:], want)
		}
	}
}

func FuzzAppendString(f *testing.F) {
	f.Add("run_01")
	f.Add("a\"<\n")
	f.Fuzz(func(t *testing.T, s string) {
		want, _ := json.Marshal(s)
		if got := AppendString(nil, s); string(got) != string(want) {
			t.Fatalf("AppendString(%q) = %s, want %s", s, got, want)
		}
	})
}

func TestIsCompact(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]bool{
		`{"a":1}`: true, `{"a b":"c\" d"}`: true, `[1,2]`: true, `"x"`: true,
		`{ "a":1}`: false, "{\"a\":\n1}": false, `[1, 2]`: false, `{"a":"\\" }`: false,
	} {
		if got := IsCompact([]byte(in)); got != want {
			t.Errorf("IsCompact(%s) = %v, want %v", in, got, want)
		}
	}
}
