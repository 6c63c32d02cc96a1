package runevents

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestAppendRecordsJSONMatchesMarshal(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 12, 1, 18, 0, 0, 123456000, time.UTC)
	rec := func(content, metadata, user string) Record {
		return Record{ThreadID: "t1", RunID: "r1", Seq: 7, EventType: "run.start", Category: "trace",
			Content: json.RawMessage(content), Metadata: json.RawMessage(metadata), CreatedAt: at, UserID: user}
	}
	for _, c := range []struct {
		recs  []Record
		plain bool
	}{
		{[]Record{rec(`{"chain":"x"}`, `{"caller":"bench"}`, "")}, true},
		{[]Record{rec(`"a<b>&c"`, `{}`, "u1"), rec(`"line\u2028sep`+"\u2029"+`"`, `{"k":[1,2.5,null,true]}`, "")}, true},
		{[]Record{rec("", "", "")}, true}, {[]Record{}, true},
		{[]Record{rec(`{"a": 1}`, `{ "b" : 2 }`, "")}, false}, // as PostgreSQL's jsonb prints them
		{[]Record{rec(`"\ud83d\ude00"`, `{}`, "")}, false},
		{[]Record{rec(`1e999`, `{}`, "")}, false},
		{nil, false},
	} {
		want, err := json.Marshal(c.recs)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := AppendRecordsJSON([]byte("x"), c.recs)
		if ok != c.plain || ok && string(got) != "x"+string(want) {
			t.Errorf("AppendRecordsJSON = %s, %v; json.Marshal = %s (plain: %v)", got[1:], ok, want, c.plain)
		}
	}
}

func BenchmarkRecordsJSON(b *testing.B) {
	recs := make([]Record, 100)
	for i := range recs {
		recs[i] = Record{ThreadID: "t1", RunID: "r1", Seq: int64(i + 1), EventType: "run.start", Category: "trace",
			Content:  json.RawMessage(`{"chain":"1764612345678901234 ` + strings.Repeat("x", 150) + `"}`),
			Metadata: json.RawMessage(`{"caller":"bench"}`), CreatedAt: time.Now().UTC()}
	}
	b.Run("marshal", func(b *testing.B) {
		for b.Loop() {
			if _, err := json.Marshal(recs); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("append", func(b *testing.B) {
		for b.Loop() {
			if _, ok := AppendRecordsJSON(nil, recs); !ok {
				b.Fatal("not plain")
			}
		}
	})
}

func TestCompactValidatesAsEncodingJSON(t *testing.T) {
	t.Parallel()
	for _, in := range []string{`{"a":[1,"x",null]}`, `"\ud83d\ude00"`, `1e999`, `{"a":1,"a":2}`, `{"a":}`, `[1,]`, `{} {}`, "\"\xff\"", `{"a": 1}`, `nul`} {
		got, err := compact([]byte(in))
		if (err == nil) != json.Valid([]byte(in)) {
			t.Errorf("compact(%s): err = %v, json.Valid = %v", in, err, json.Valid([]byte(in)))
		}
		var want bytes.Buffer
		if err == nil && (json.Compact(&want, []byte(in)) != nil || string(got) != want.String()) {
			t.Errorf("compact(%s) = %s, want %s", in, got, want.String())
		}
	}
}
