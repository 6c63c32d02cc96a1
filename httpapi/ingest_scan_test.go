package httpapi

import (
	"bytes"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/internal/jsonscan"
)

// benchIngestBody is a POST body of n events shaped as the thread-ingest
// benchmark sends them: about 200 bytes of content and metadata each.
func benchIngestBody(n int) []byte {
	var b bytes.Buffer
	b.WriteString(`{"events":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"event_type":"run.start","content":{"chain":"1764612345678901234 %s"},"metadata":{"caller":"bench"}}`, strings.Repeat("x", 150))
	}
	b.WriteString(`]}`)
	return b.Bytes()
}

// jsonCorpus holds JSON texts and near misses: what jsonscan.Plain
// accepts, CheckJSON's token check must accept too.
var jsonCorpus = []string{
	`{}`, `[]`, `""`, `0`, `-0`, `1.5e3`, `1e999`, `-1e999`, `1e-999`, `01`, `1.`, `.5`, `-`, `1e`, `1e+`, `+1`,
	`true`, `false`, `null`, `nul`, `tru`, `{"a":1,"a":2}`, `{"a":1,"b":2}`, `{"a":{"a":1}}`, `{"a" : 1 , "b" : [ 1 , 2 ] }`,
	`{"a":1,}`, `[1,]`, `[,1]`, `{"a"}`, `{"a":}`, `{1:2}`, `{"a":1 "b":2}`, `[1 2]`, `{} {}`, `{} `, ` {}`, "\ufeff{}",
	`"\u00e9"`, `"\ud83d\ude00"`, `"\ud800"`, `"\x"`, `"\u12"`, `"\u12G4"`, "\"a\tb\"", "\"\x01\"", `"\/\b\f\n\r\t\"\\"`,
	`{"a\u0062":1,"ab":2}`, `{"\"":1}`, "\xff", `"` + "\xff" + `"`, `[` + strings.Repeat("9", 320) + `]`,
	strings.Repeat("[", MaxJSONDepth) + strings.Repeat("]", MaxJSONDepth),
	strings.Repeat("[", MaxJSONDepth+1) + strings.Repeat("]", MaxJSONDepth+1),
	strings.Repeat(`{"a":`, MaxJSONDepth) + `1` + strings.Repeat("}", MaxJSONDepth),
	strings.Repeat(`{"a":`, MaxJSONDepth+1) + `1` + strings.Repeat("}", MaxJSONDepth+1),
	`{"events":[{"event_type":"run.start","content":{"k":[1,2,{"x":null}]},"metadata":{}}]}`,
}

func TestCheckJSONPlainAgreesWithTokens(t *testing.T) {
	t.Parallel()
	for _, in := range jsonCorpus {
		if jsonscan.Plain([]byte(in), MaxJSONDepth) {
			if err := checkJSONTokens([]byte(in)); err != nil {
				t.Errorf("Plain accepted %q, which the token check refuses: %v", in, err)
			}
		}
	}
	// The one-pass check takes the usual bodies: the fast path is used.
	for _, body := range [][]byte{benchIngestBody(1), benchIngestBody(100)} {
		if !jsonscan.Plain(body, MaxJSONDepth) {
			t.Errorf("Plain refused an ingest body of %d bytes", len(body))
		}
	}
}

func FuzzCheckJSONPlain(f *testing.F) {
	for _, seed := range jsonCorpus {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if jsonscan.Plain(b, MaxJSONDepth) {
			if err := checkJSONTokens(b); err != nil {
				t.Fatalf("Plain accepted %q, which the token check refuses: %v", b, err)
			}
		}
	})
}

// ingestCorpus holds ingest bodies, plain and not, valid and not.
var ingestCorpus = []string{
	string(benchIngestBody(1)), string(benchIngestBody(3)),
	`{"events":[{"event_type":"run.start"}]}`,
	`{"events":[{"event_type":"run.start","category":"trace","content":"hi","metadata":null,"created_at":null,"run_id":null}]}`,
	`{"events":[{"event_type":"run.start","created_at":"2026-01-02T03:04:05Z"}]}`,
	`{"events":[{"event_type":"run.start","created_at":"yesterday"}]}`,
	`{"events":[{"event_type":"run.start","created_at":5}]}`,
	`{"events":[{"event_type":"run.start","run_id":"r2"}]}`,
	`{"events":[{"event_type":"run.start","run_id":"bad id"}]}`,
	`{"events":[{"event_type":"run.start","run_id":7}]}`,
	`{"events":[{"event_type":""}]}`, `{"events":[{"event_type":null}]}`, `{"events":[{}]}`, `{"events":[{"event_type":1}]}`,
	`{"events":[{"event_type":"run.\u0073tart"}]}`, `{"events":[{"event\u005ftype":"run.start"}]}`,
	`{"events":[{"EVENT_TYPE":"run.start"}]}`, `{"events":[{"event_type":"run.start","extra":1}]}`,
	`{"events":[{"event_type":"run.start","category":null}]}`, `{"events":[{"event_type":"run.start","content":null}]}`,
	`{"events":[{"event_type":"run.start","metadata":[1]}]}`, `{"events":[1]}`, `{"events":["x"]}`, `{"events":[[]]}`,
	`{"events":[]}`, `{"events":null}`, `{"events":{}}`, `{}`, `[]`, `{"Events":[]}`, `{"events":[],"more":1}`,
	`{ "events" : [ { "event_type" : "run.start" , "content" : { "a" : [ 1 , 2 ] } } , { "event_type" : "run.end" } ] }`,
	`{"events":[{"event_type":"run.start"},{"event_type":"run.start","run_id":"x"}]}`,
	`{"events":[` + strings.Repeat(`{"event_type":"run.start"},`, 100) + `{"event_type":"run.start"}]}`,
}

func TestDecodeIngestScanAgreesWithStrict(t *testing.T) {
	t.Parallel()
	for _, body := range ingestCorpus {
		if CheckJSON([]byte(body)) != nil {
			t.Fatalf("corpus body is not valid JSON: %s", body)
		}
		for _, run := range []string{"r1", ""} {
			checkDecodeIngestAgrees(t, []byte(body), run)
		}
	}
	// The one-pass path takes the usual bodies.
	for _, body := range [][]byte{benchIngestBody(1), benchIngestBody(100), []byte(ingestCorpus[4])} {
		if _, ok := scanIngest(body, 100); !ok {
			t.Errorf("scanIngest refused %.80s…", body)
		}
	}
}

func FuzzDecodeIngestScan(f *testing.F) {
	for _, body := range ingestCorpus {
		f.Add([]byte(body), true)
	}
	f.Fuzz(func(t *testing.T, body []byte, withRun bool) {
		if CheckJSON(body) != nil {
			return // refused before decoding
		}
		run := ""
		if withRun {
			run = "r1"
		}
		checkDecodeIngestAgrees(t, body, run)
	})
}

// checkDecodeIngestAgrees checks that decodeIngest answers as
// decodeIngestStrict does when it scans the body: the same events, or the
// same error. (A body scanIngest refuses goes to decodeIngestStrict,
// whose choice among several unknown members is not deterministic.)
func checkDecodeIngestAgrees(t *testing.T, body []byte, run string) {
	t.Helper()
	if _, ok := scanIngest(body, 100); !ok {
		return
	}
	got, gotErr := decodeIngest(body, "t1", run, 100)
	want, wantErr := decodeIngestStrict(body, "t1", run, 100)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s (run %q): events\n%+v, strict decoding gives\n%+v", body, run, got, want)
	}
	if errText(gotErr) != errText(wantErr) {
		t.Errorf("%s (run %q): error %s, strict decoding gives %s", body, run, errText(gotErr), errText(wantErr))
	}
}

// errText renders an error with its code and details, for comparing.
func errText(err error) string {
	if err == nil {
		return "<nil>"
	}
	e := runstream.AsError(err)
	return fmt.Sprintf("%s %q %v", e.Code, e.Message, e.Details)
}

// The benchmarks run the old way (token check, strict decoding) beside
// the one-pass way on the thread-ingest benchmark's bodies.
func BenchmarkCheckJSON(b *testing.B) {
	for _, n := range []int{1, 100} {
		body := benchIngestBody(n)
		b.Run("tokens/events="+strconv.Itoa(n), func(b *testing.B) {
			for b.Loop() {
				if err := checkJSONTokens(body); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("plain/events="+strconv.Itoa(n), func(b *testing.B) {
			for b.Loop() {
				if err := CheckJSON(body); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkDecodeIngest(b *testing.B) {
	for _, n := range []int{1, 100} {
		body := benchIngestBody(n)
		b.Run("strict/events="+strconv.Itoa(n), func(b *testing.B) {
			for b.Loop() {
				if _, err := decodeIngestStrict(body, "t1", "r1", 100); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("scan/events="+strconv.Itoa(n), func(b *testing.B) {
			for b.Loop() {
				if _, err := decodeIngest(body, "t1", "r1", 100); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
