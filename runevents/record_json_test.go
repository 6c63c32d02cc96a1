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

// RecordText.AppendJSON writes what Record.AppendJSON writes of the record
// the text holds, whatever its strings, content, metadata and offset.
func TestRecordTextJSONMatchesRecord(t *testing.T) {
	t.Parallel()
	zones := []*time.Location{time.UTC, time.FixedZone("", 5*3600+30*60), time.FixedZone("", -8*3600)}
	for i, r := range []Record{
		{ThreadID: "t1", RunID: "r1", EventType: "run.start", Category: "trace", Content: json.RawMessage(`{"a":1}`), Metadata: json.RawMessage(`{"k":"v"}`), UserID: "u1"},
		{ThreadID: "t-2", RunID: "r_2", EventType: `a"b\c<d>&`, Category: "κατηγορία", Content: json.RawMessage(`"line\u2028"`), Metadata: json.RawMessage(`{}`)},
		{ThreadID: "t3", RunID: "r3", EventType: "x", Category: "y", UserID: "zoë\u2029\x01"},
		{ThreadID: "t4", RunID: "r4", EventType: "x", Category: "y", Content: json.RawMessage(`12`), Seq: 1 << 40},
	} {
		r.CreatedAt = time.Date(2026, 12, 2, 7, 15, 0, int(i)*1000+123000, zones[i%len(zones)])
		r.Seq += int64(i + 1)
		text := RecordText[string]{ThreadID: r.ThreadID, RunID: r.RunID, UserID: r.UserID, EventType: string(r.EventType), Category: string(r.Category),
			Content: string(r.Content), Metadata: string(r.Metadata), Seq: r.Seq, CreatedAt: r.CreatedAt.Format(CreatedAtLayout)}
		want := r.AppendJSON([]byte("x"))
		if got := text.AppendJSON([]byte("x")); !bytes.Equal(got, want) {
			t.Errorf("record %d: RecordText.AppendJSON = %s\nRecord.AppendJSON = %s", i, got, want)
		}
		if !json.Valid(want[1:]) {
			t.Errorf("record %d: not JSON: %s", i, want[1:])
		}
	}
}

// Record.AppendJSON and RecordText.AppendJSON allocate nothing beyond
// growing b: replays call them for every row.
func TestEnvelopesDoNotAllocate(t *testing.T) {
	r := Record{ThreadID: "t1", RunID: "r1", UserID: "u", EventType: "run.start", Category: "trace", Seq: 7,
		Content: json.RawMessage(`{"a":1}`), Metadata: json.RawMessage(`{}`), CreatedAt: time.Date(2026, 12, 2, 7, 45, 0, 0, time.FixedZone("", 3600))}
	text := RecordText[[]byte]{ThreadID: []byte("t1"), RunID: []byte("r1"), UserID: []byte("u"), EventType: []byte("run.start"), Category: []byte("trace"),
		Content: []byte(`{"a":1}`), Metadata: []byte(`{}`), Seq: 7, CreatedAt: []byte(r.CreatedAt.Format(CreatedAtLayout))}
	buf := make([]byte, 0, 1024)
	if n := testing.AllocsPerRun(100, func() { buf = r.AppendJSON(buf[:0]) }); n != 0 {
		t.Errorf("Record.AppendJSON: %v allocations", n)
	}
	if n := testing.AllocsPerRun(100, func() { buf = text.AppendJSON(buf[:0]) }); n != 0 {
		t.Errorf("RecordText.AppendJSON: %v allocations", n)
	}
	if string(text.AppendJSON(nil)) != string(r.AppendJSON(nil)) {
		t.Errorf("RecordText[[]byte] %s\nRecord %s", text.AppendJSON(nil), r.AppendJSON(nil))
	}
}
