package redact

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// decode decodes a JSON literal as JSON does, with json.Number.
func decode(t *testing.T, s string) any {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("decode %s: %v", s, err)
	}
	return v
}

func encode(t *testing.T, v any) string {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatalf("encode: %v", err)
	}
	return strings.TrimSuffix(buf.String(), "\n")
}

func TestValueRules(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   string
		want string // "" means unchanged
	}{
		{"string under strong key", `{"password":"hunter2"}`, `{"password":"[REDACTED:key]"}`},
		{"number under strong key", `{"pin_password":1234}`, `{"pin_password":"[REDACTED:key]"}`},
		{"object under key", `{"credentials":{"user":"a","pass":"b"}}`, `{"credentials":"[REDACTED:key]"}`},
		{"array under key", `{"cookies":["a=b"]}`, `{"cookies":"[REDACTED:key]"}`},
		{"header map", `{"headers":{"Authorization":"Bearer abc","Content-Type":"application/json"}}`,
			`{"headers":{"Authorization":"[REDACTED:key]","Content-Type":"application/json"}}`},
		{"nested in array", `[{"a":[{"access_token":"x"}]}]`, `[{"a":[{"access_token":"[REDACTED:key]"}]}]`},
		{"empty values carry nothing", `{"password":"","token":null,"secret":{},"apikey":[],"has_password":true}`, ""},
		{"count under weak key", `{"output_token":12,"token":7}`, ""},
		{"marker under key", `{"password":"[REDACTED:key]"}`, ""},
		{"token accounting", `{"usage":{"input_tokens":1,"output_tokens":2,"total_tokens":3},"max_tokens":4096,"token_count":5,"token_usage":{"prompt_tokens":1,"completion_tokens":2},"tokenizer":"cl100k","tokens":["a"],"secretary":"Ann","content_sha256":"ab"}`, ""},
		{"string rule below ordinary key", `{"msg":"DATABASE_URL=x and postgres://app:pw@db:5432/app"}`,
			`{"msg":"DATABASE_URL=x and postgres://[REDACTED:dsn]@db:5432/app"}`},
		{"thinking block dropped", `{"content":[{"type":"thinking","thinking":"hmm","signature":"sig"},{"type":"redacted_thinking","data":"enc"},{"type":"text","text":"hi"}]}`,
			`{"content":[{"text":"hi","type":"text"}]}`},
		{"all blocks dropped", `{"content":[{"type":"thinking","thinking":"hmm"}]}`, `{"content":[]}`},
		{"streaming block", `{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}`,
			`{"content_block":{"type":"thinking"},"index":0,"type":"content_block_start"}`},
		{"signature delta", `{"type":"content_block_delta","delta":{"type":"signature_delta","signature":"EqQB"}}`,
			`{"delta":{"type":"signature_delta"},"type":"content_block_delta"}`},
		{"thinking delta", `{"delta":{"type":"thinking_delta","thinking":"step 1"}}`, `{"delta":{"type":"thinking_delta"}}`},
		{"reasoning_content", `{"additional_kwargs":{"reasoning_content":"first I","refusal":null}}`, `{"additional_kwargs":{"refusal":null}}`},
		{"reasoningContent", `{"reasoningContent":"x","text":"y"}`, `{"text":"y"}`},
		{"openai reasoning item", `{"type":"reasoning","summary":[{"type":"summary_text","text":"s"}],"encrypted_content":"gAAA"}`,
			`{"summary":[{"text":"s","type":"summary_text"}],"type":"reasoning"}`},
		{"thinking text", `{"thinking":"let me think"}`, `{}`},
		{"thinking config kept", `{"thinking":{"type":"enabled","budget_tokens":2048}}`, ""},
		{"thinking flag kept", `{"thinking":true}`, ""},
		{"signature elsewhere kept", `{"tool":{"signature":"func(a int) error"}}`, ""},
		{"scalars", `[1.5,true,null,"plain"]`, ""},
	}
	r := New(Options{})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			in := decode(t, tt.in)
			got, changed := r.Value(in)
			want := tt.want
			if want == "" {
				want = encode(t, decode(t, tt.in))
			}
			if g := encode(t, got); g != want {
				t.Errorf("Value(%s)\n got %s\nwant %s", tt.in, g, want)
			}
			if changed != (tt.want != "") {
				t.Errorf("changed = %v, want %v", changed, tt.want != "")
			}
			if tt.want == "" && reflect.ValueOf(got).Kind() == reflect.Map && reflect.ValueOf(got).Pointer() != reflect.ValueOf(in).Pointer() {
				t.Errorf("unchanged map was copied")
			}
		})
	}
}

func TestStringRules(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in, want string // want "" means unchanged
	}{
		{"postgres://app:s3cret@db.example:5432/app", "postgres://[REDACTED:dsn]@db.example:5432/app"},
		{"redis://:pw@cache:6379/0", "redis://[REDACTED:dsn]@cache:6379/0"},
		{"mongodb+srv://u:p@cluster0.example.net/db", "mongodb+srv://[REDACTED:dsn]@cluster0.example.net/db"},
		{"postgres://app:p@ss@db/app", "postgres://[REDACTED:dsn]@db/app"},
		{"https://user:pw@example.com/x", "https://[REDACTED:url_credentials]@example.com/x"},
		{"jdbc:postgresql://db/app?user=app&password=pw&ssl=true", "jdbc:postgresql://db/app?user=app&password=[REDACTED:key]&ssl=true"},
		// A query parameter's name is read percent-decoded: pass%77ord is password.
		{"postgres://db/app?pass%77ord=pw&ssl%6Dode=disable", "postgres://db/app?pass%77ord=[REDACTED:key]&ssl%6Dode=disable"},
		{"growth=50%&sslpassword=pw", "growth=50%&sslpassword=[REDACTED:key]"},
		{"Server=db;Database=app;User Id=sa;Password=pw;", "Server=db;Database=app;User Id=sa;Password=[REDACTED:key];"},
		{"host=db user=app password='a b' dbname=x", "host=db user=app password='[REDACTED:key]' dbname=x"},
		{"export GITHUB_TOKEN=abc\nexport PATH=/bin", "export GITHUB_TOKEN=[REDACTED:key]\nexport PATH=/bin"},
		{`{"api_key": "abc", "n": 1}`, `{"api_key": "[REDACTED:key]", "n": 1}`},
		{`{\"password\":\"abc\"}`, `{\"password\":\"[REDACTED:key]\"}`},
		{`{'secret': 'abc'}`, `{'secret': '[REDACTED:key]'}`},
		{`$cfg = ['password' => 'abc'];`, `$cfg = ['password' => '[REDACTED:key]'];`},
		{`password := "abc"`, `password := "[REDACTED:key]"`},
		{"GET / HTTP/1.1\r\nHost: x\r\nCookie: sid=abc; theme=dark\r\n", "GET / HTTP/1.1\r\nHost: x\r\nCookie: [REDACTED:key]\r\n"},
		{"Authorization: Digest username=\"a\", response=\"b\"", "Authorization: Digest [REDACTED:key]"},
		{"authorization: token abc", "authorization: token [REDACTED:key]"},
		{"db:\n  password: hunter2\n  host: x", "db:\n  password: [REDACTED:key]\n  host: x"},
		{"Authorization: Bearer abcDEF123456", "Authorization: Bearer [REDACTED:bearer]"},
		{"Authorization: Bearer plainword", "Authorization: Bearer [REDACTED:key]"},
		{"curl -H 'X-Api-Key: k1' https://api", "curl -H 'X-Api-Key: [REDACTED:key]' https://api"},
		{"max_tokens=1024 output_token=12", ""},
		{"if password == \"\" {", ""},
		{"To reset your password: open settings.", ""},
		{"Bearer tokens are defined in RFC 6750; basic authentication is older.", ""},
		{"Content-Type: application/json", ""},
		{"[REDACTED:openai_key] [REDACTED:dsn] password=[REDACTED:key]", ""},
	}
	r := New(Options{})
	for _, tt := range tests {
		got, changed := r.String(tt.in)
		want := tt.want
		if want == "" {
			want = tt.in
		}
		if got != want || changed != (tt.want != "") {
			t.Errorf("String(%q)\n got %q, %v\nwant %q, %v", tt.in, got, changed, want, tt.want != "")
		}
	}
}

func TestKeepKeys(t *testing.T) {
	t.Parallel()
	token := strings.Repeat("Ab3-_x", 7) // shaped like a base64url resume token
	data := `{"formSchema":{"type":"object"},"actions":["approve","reject"],"resumeToken":"` + token + `"}`

	keep := New(Options{KeepKeys: []string{"resumeToken"}})
	out, changed, err := keep.JSON([]byte(data))
	if err != nil || changed || string(out) != data {
		t.Fatalf("with KeepKeys: JSON = %s, %v, %v; want the input unchanged", out, changed, err)
	}

	out, changed, err = New(Options{}).JSON([]byte(data))
	if err != nil || !changed || strings.Contains(string(out), token) {
		t.Fatalf("without KeepKeys: JSON = %s, %v, %v; want the token redacted", out, changed, err)
	}

	// Keeping is exact and per key: other secrets in the event still go.
	mixed := `{"resumeToken":"` + token + `","password":"pw","resume_token":"x","nested":{"resumeToken":"y"}}`
	out, _, err = keep.JSON([]byte(mixed))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"nested":{"resumeToken":"y"},"password":"[REDACTED:key]","resumeToken":"` + token + `","resume_token":"[REDACTED:key]"}`
	if string(out) != want {
		t.Errorf("mixed:\n got %s\nwant %s", out, want)
	}

	// A kept value is verbatim even when it looks like a secret.
	v := map[string]any{"resumeToken": "postgres://a:b@c/d"}
	if got, changed := keep.Value(v); changed || got.(map[string]any)["resumeToken"] != "postgres://a:b@c/d" {
		t.Errorf("kept value changed: %v", got)
	}
}

func TestExtraKeys(t *testing.T) {
	t.Parallel()
	r := New(Options{ExtraKeys: []string{"Jira-Ticket"}})
	got, changed := r.Value(map[string]any{"jira_ticket": "T-1", "ticket": "T-2"})
	want := map[string]any{"jira_ticket": "[REDACTED:key]", "ticket": "T-2"}
	if !changed || !reflect.DeepEqual(got, want) {
		t.Errorf("Value = %v, %v; want %v", got, changed, want)
	}
	if s, _ := r.String("JIRA_TICKET=T-1"); s != "JIRA_TICKET=[REDACTED:key]" {
		t.Errorf("String = %q", s)
	}
}

func TestValueDoesNotMutate(t *testing.T) {
	t.Parallel()
	const doc = `{"a":{"password":"pw","keep":{"x":1}},"b":[{"type":"thinking","thinking":"t"},"postgres://u:p@h/d",{"y":2}],"c":"plain"}`
	in := decode(t, doc)
	before := encode(t, in)
	inMap := in.(map[string]any)
	shared := inMap["a"].(map[string]any)["keep"]

	got, changed := New(Options{}).Value(in)
	if !changed {
		t.Fatal("nothing changed")
	}
	if after := encode(t, in); after != before {
		t.Errorf("input mutated:\nbefore %s\nafter  %s", before, after)
	}
	out := got.(map[string]any)
	if reflect.ValueOf(out).Pointer() == reflect.ValueOf(inMap).Pointer() {
		t.Error("changed root map is the input map")
	}
	if p := out["a"].(map[string]any)["keep"]; reflect.ValueOf(p).Pointer() != reflect.ValueOf(shared).Pointer() {
		t.Error("unchanged subtree was copied")
	}
	b := out["b"].([]any)
	if len(b) != 2 || b[0] != "postgres://[REDACTED:dsn]@h/d" {
		t.Errorf("b = %v", b)
	}
	if reflect.ValueOf(b[1]).Pointer() != reflect.ValueOf(inMap["b"].([]any)[2]).Pointer() {
		t.Error("unchanged array element was copied")
	}
}

func TestJSONUnchangedReturnsInput(t *testing.T) {
	t.Parallel()
	raw := []byte(" {\"b\": 1.50, \"a\": [1e3, \"x\\ny\", \"\\u00e9\"], \"usage\": {\"total_tokens\": 7}} \n")
	out, changed, err := New(Options{}).JSON(raw)
	if err != nil || changed {
		t.Fatalf("JSON = %v, %v", changed, err)
	}
	if &out[0] != &raw[0] || len(out) != len(raw) {
		t.Error("unchanged JSON was copied")
	}
}

func TestJSONNumbersRoundTrip(t *testing.T) {
	t.Parallel()
	const nums = `[12345678901234567890,1.0,1e-7,-0,0.10,3.14159265358979323846264,1E+400]`
	raw := `{"n":` + nums + `,"password":"pw","s":"<a&b>"}`
	out, changed, err := New(Options{}).JSON([]byte(raw))
	if err != nil || !changed {
		t.Fatalf("JSON = %s, %v, %v", out, changed, err)
	}
	want := `{"n":` + nums + `,"password":"[REDACTED:key]","s":"<a&b>"}`
	if string(out) != want {
		t.Errorf("JSON\n got %s\nwant %s", out, want)
	}
}

func TestJSONInvalid(t *testing.T) {
	t.Parallel()
	for _, raw := range []string{"", "{", `{"a":1}x`, `{"a":}`, "nul"} {
		if out, _, err := New(Options{}).JSON([]byte(raw)); err == nil {
			t.Errorf("JSON(%q) = %s, want an error", raw, out)
		}
	}
}

func TestJSONEscapedStrings(t *testing.T) {
	t.Parallel()
	// Escapes must not hide a secret from the fast scan.
	raw := `{"a":"postgres:\/\/u:p@h\/d","b":"line\nAuthorization: Bearer abcDEF123456"}`
	out, changed, err := New(Options{}).JSON([]byte(raw))
	if err != nil || !changed {
		t.Fatalf("JSON = %s, %v, %v", out, changed, err)
	}
	want := `{"a":"postgres://[REDACTED:dsn]@h/d","b":"line\nAuthorization: Bearer [REDACTED:bearer]"}`
	if string(out) != want {
		t.Errorf("JSON\n got %s\nwant %s", out, want)
	}
}

func TestMarkersNeverMatch(t *testing.T) {
	t.Parallel()
	r := New(Options{})
	var names []string
	for _, rule := range valueRules {
		names = append(names, rule.name)
	}
	names = append(names, "key", "url_credentials")
	for _, n := range names {
		m := marker(n)
		if !isMarker(m) {
			t.Errorf("isMarker(%q) = false", m)
		}
		for _, s := range []string{m, "x " + m + " y", "password=" + m, "Authorization: Bearer " + m, "postgres://" + m + "@h/d"} {
			if got, changed := r.String(s); changed {
				t.Errorf("String(%q) = %q, a marker matched", s, got)
			}
		}
		if got, changed := r.Value(map[string]any{"token": m}); changed {
			t.Errorf("marker under a key changed: %v", got)
		}
	}
}

// TestContinuation: the start of a continued text is the middle of a line.
func TestContinuation(t *testing.T) {
	t.Parallel()
	r := New(Options{})
	for in, want := range map[string]string{
		"password: go to settings and click ":      "password: go to settings and click ",
		"Bearer q8Zt3LmN0pXv7Rk2Yb5WcJ4hQ9 ok":     "Bearer [REDACTED:bearer] ok",
		"word\npassword: hunter2\n":                "word\npassword: [REDACTED:key]\n",
		"DB_PASSWORD=hunter2 ok":                   "DB_PASSWORD=[REDACTED:key] ok",
		"sk-proj-Ab12Cd34Ef56Gh78Ij90Kl12Mn34Op56": "[REDACTED:openai_key]",
		"nothing here":                             "nothing here",
	} {
		if got, _ := r.Continuation(in); got != want {
			t.Errorf("Continuation(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestOpenPrivateKey: the BEGIN line of a block still being written, none
// once its END line came.
func TestOpenPrivateKey(t *testing.T) {
	t.Parallel()
	const begin = "-----BEGIN RSA PRIVATE KEY-----"
	for in, want := range map[string]string{
		"text " + begin + "\nMIIE":                                      begin,
		begin + "\nMIIE\n-----END RSA PRIVATE KEY-----\nmore":           "",
		begin + "\nx\n-----END RSA PRIVATE KEY-----\n" + begin + "\nMI": begin,
		"-----BEGIN RSA PRIVATE ":                                       "",
		"-----BEGIN CERTIFICATE-----\nMIIE":                             "",
		"-----BEGIN PRIVATE KEY-----\nMIIE\n-----END RSA":               "-----BEGIN PRIVATE KEY-----",
	} {
		if got := string(OpenPrivateKey([]byte(in))); got != want {
			t.Errorf("OpenPrivateKey(%q) = %q, want %q", in, got, want)
		}
	}
}
