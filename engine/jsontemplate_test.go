package engine_test

import (
	"encoding/json"
	"testing"

	"github.com/runstream/runstream/engine"
)

func TestJSONTemplate(t *testing.T) {
	t.Parallel()
	env, err := engine.NewEnv(json.RawMessage(`{"n":3,"who":"Ada","tags":["a","b"]}`),
		map[string]json.RawMessage{"prev": json.RawMessage(`{"text":"hi"}`)})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct{ name, tmpl, want string }{
		{"Empty", ``, `null`},
		{"Literal", `{"a":[1,2.5,true,null,"x"]}`, `{"a":[1,2.5,true,null,"x"]}`},
		{"WholeExpressionKeepsType", `{"n":"{{ input.n }}","tags":"{{input.tags}}"}`, `{"n":3,"tags":["a","b"]}`},
		{"TextTemplate", `{"s":"{{ input.who }} has {{ input.n }}"}`, `{"s":"Ada has 3"}`},
		{"Nested", `[{"x":{"y":"{{ nodes.prev.output.text }}!"}}]`, `[{"x":{"y":"hi!"}}]`},
		{"BigNumberKept", `{"n":12345678901234567890}`, `{"n":12345678901234567890}`},
		// Whole expressions with metered operations (string +, repeat, ==).
		{"MeteredWholeExpression", `{"s":"{{ input.who + \"!\" }}","r":"{{ repeat(\"ab\", 2) }}","e":"{{ input.tags == [\"a\", \"b\"] }}"}`,
			`{"e":true,"r":"abab","s":"Ada!"}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			jt, err := engine.CompileJSONTemplate(json.RawMessage(tc.tmpl))
			if err != nil {
				t.Fatal(err)
			}
			got, err := jt.Render(env)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Errorf("got %s, want %s", got, tc.want)
			}
		})
	}
	for _, bad := range []string{`{"a":"{{ nope( }}"}`, `{"a":"{{ unknown }}"}`, `{"a":`} {
		if _, err := engine.CompileJSONTemplate(json.RawMessage(bad)); err == nil {
			t.Errorf("CompileJSONTemplate(%s) succeeded", bad)
		}
	}
}
