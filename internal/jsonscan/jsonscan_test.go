package jsonscan

import (
	"strings"
	"testing"
)

func TestPlain(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]bool{
		`{"a":[1,-2.5e3,true,false,null,"x\n\u00e9"],"b":{}}`: true, ` [ ] `: true, `"\ud83d\ude00"`: false,
		`{"a":1,"a":2}`: false, `{"a\u0062":1}`: false, `1e999`: false, `{"a":1,}`: false, `[1 2]`: false, `{} {}`: false,
		"\"\xff\"": false, "\"\x01\"": false, `01`: false, `[[[]]]`: true, `[[[[]]]]`: false,
	} {
		if got := Plain([]byte(in), 3); got != want {
			t.Errorf("Plain(%s) = %v, want %v", in, got, want)
		}
	}
	big := "{"
	for i := range maxMembers + 1 {
		if i > 0 {
			big += ","
		}
		big += `"k` + strings.Repeat("x", i) + `":1`
	}
	if Plain([]byte(big+"}"), 3) {
		t.Errorf("Plain accepted an object of %d members", maxMembers+1)
	}
}

func TestMembersElementsString(t *testing.T) {
	t.Parallel()
	data := []byte(` { "a" : [ 1 , {"x":"]"} , "s\"" ] , "b":"t" , "c" : -1.5 } `)
	var got []string
	ok := Members(data, func(name, value []byte) bool {
		got = append(got, string(name)+"="+string(value))
		if string(name) == "a" {
			Elements(value, func(v []byte) bool { got = append(got, "["+string(v)+"]"); return true })
		}
		return true
	})
	want := `a=[ 1 , {"x":"]"} , "s\"" ] [1] [{"x":"]"}] ["s\""] b="t" c=-1.5`
	if !ok || strings.Join(got, " ") != want {
		t.Errorf("Members, Elements = %v, %q; want %q", ok, strings.Join(got, " "), want)
	}
	if Members([]byte(`[1]`), func(_, _ []byte) bool { return true }) || Elements([]byte(`{}`), func([]byte) bool { return true }) {
		t.Error("Members of an array or Elements of an object succeeded")
	}
	if s, ok := String([]byte(`"abc"`)); !ok || s != "abc" {
		t.Errorf(`String("abc") = %q, %v`, s, ok)
	}
	if _, ok := String([]byte(`"a\nb"`)); ok {
		t.Error("String took a string with an escape")
	}
}

// benchEvent is a 300-byte ingest event of the plain kind.
const benchEvent = `{"type":"ai_message","run_id":"run_01J9Z8X7Q2","thread_id":"thr_3f2a9c","seq":42,` +
	`"content":"I checked the repository: the failing test is in store/append_test.go.\nThe fix is to flush pending deltas first.",` +
	`"usage":{"input_tokens":1532,"output_tokens":87,"total_tokens":1619},"latency_ms":812,"model":"gpt-4o-mini",` +
	`"created_at":"2026-03-01T12:34:56.789Z"}`

func BenchmarkPlain(b *testing.B) {
	data := []byte(benchEvent)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if !Plain(data, 10000) {
			b.Fatal("Plain = false")
		}
	}
}
