package runeventstest

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/runstream/runstream/runevents"
)

var contentTests = []test{
	{"JSONRoundTrip", func(t *testing.T, s runevents.Store) {
		cases := []struct{ name, content, want string }{
			{"string with separators", "\"line\u2028sep\u2029next\u0085end\"", ""},
			{"escaped NUL and separators", `"nul\u0000 ls\u2028 ps\u2029 nel\u0085 tab\t quote\" back\\"`, ""},
			{"emoji", "\"grin 😀 and \\ud83d\\ude00\"", ""},
			{"non-ASCII", `"héllo wörld 你好"`, ""},
			{"empty string", `""`, ""},
			{"nested object", `{"b": [1, [2, {"c": [true, null]}]], "a": {"z": "", "y": {}} }`, `{"b":[1,[2,{"c":[true,null]}]],"a":{"z":"","y":{}}}`},
			{"array", ` [ {"type":"text","text":"x"}, {"type":"image_url"} ] `, `[{"type":"text","text":"x"},{"type":"image_url"}]`},
			{"big integer", `12345678901234567890`, ""},
			{"negative fraction", `-0.5`, ""},
			{"exponent", `1e-7`, ""},
			{"zero", `0`, ""},
			{"true", `true`, ""},
			{"false", `false`, ""},
			{"null", `null`, ""},
			{"empty object", `{}`, ""},
			{"empty array", `[]`, ""},
		}
		for i, c := range cases {
			want := c.want
			if want == "" {
				want = c.content
			}
			run := "r" + string(rune('a'+i))
			for _, cat := range []runevents.Category{runevents.CategoryMessage, runevents.CategoryTrace} {
				e := ev("t1", run, runevents.EventRunEnd, cat, c.content)
				rec := put(t, s, e)
				if string(rec.Content) != want {
					t.Errorf("%s (%s): Put returned content %s, want %s", c.name, cat, rec.Content, want)
				}
			}
			for _, got := range runRows(t, s, "t1", run, asAlice) {
				if string(got.Content) != want {
					t.Errorf("%s (%s): read content %s, want %s", c.name, got.Category, got.Content, want)
				}
			}
		}
	}},
	{"Defaults", func(t *testing.T, s runevents.Store) {
		e := runevents.NewEvent{ThreadID: "t1", RunID: "r1", EventType: runevents.EventRunEnd, Category: runevents.CategoryOutputs, UserID: alice}
		put(t, s, e)
		e.Content, e.Metadata = json.RawMessage(`null`), json.RawMessage(`{ "b": 1, "a": {"c": 2} }`)
		put(t, s, e)
		got := runRows(t, s, "t1", "r1", asAlice)
		if len(got) != 2 {
			t.Fatalf("%d rows, want 2", len(got))
		}
		if string(got[0].Content) != `""` || string(got[0].Metadata) != `{}` {
			t.Errorf("nil content and metadata read back as %s and %s, want \"\" and {}", got[0].Content, got[0].Metadata)
		}
		if string(got[1].Content) != `null` || string(got[1].Metadata) != `{"b":1,"a":{"c":2}}` {
			t.Errorf("null content and metadata read back as %s and %s, want null and compact metadata in writer order", got[1].Content, got[1].Metadata)
		}
	}},
	{"CreatedAtGiven", func(t *testing.T, s runevents.Store) {
		zones := []*time.Location{time.FixedZone("", 8*3600), time.FixedZone("", -(5*3600 + 30*60)), time.UTC}
		for i, zone := range zones {
			e := trace("t1", "r1")
			e.CreatedAt = time.Date(2024, 6, 1, 12, 0, 0, 123456789+i, zone)
			want := time.Date(2024, 6, 1, 12, 0, 0, 123456000, zone)
			rec := put(t, s, e)
			checkTime(t, "Put", rec.CreatedAt, want)
			got := runRows(t, s, "t1", "r1", asAlice)
			checkTime(t, "read", got[len(got)-1].CreatedAt, want)
		}
	}},
	{"CreatedAtAssigned", func(t *testing.T, s runevents.Store) {
		before := time.Now().Truncate(time.Microsecond)
		rec := put(t, s, trace("t1", "r1"))
		recs := putBatch(t, s, []runevents.NewEvent{trace("t1", "r1")})
		after := time.Now()
		got := runRows(t, s, "t1", "r1", asAlice)
		for _, c := range []time.Time{rec.CreatedAt, recs[0].CreatedAt, got[0].CreatedAt, got[1].CreatedAt} {
			if _, off := c.Zone(); off != 0 {
				t.Errorf("assigned created_at %s is not UTC", c.Format(time.RFC3339Nano))
			}
			if c.Before(before) || c.After(after) {
				t.Errorf("assigned created_at %s outside [%s, %s]", c.Format(time.RFC3339Nano), before.Format(time.RFC3339Nano), after.Format(time.RFC3339Nano))
			}
			if c.Nanosecond()%1000 != 0 {
				t.Errorf("assigned created_at %s has sub-microsecond digits", c.Format(time.RFC3339Nano))
			}
		}
		if !got[0].CreatedAt.Equal(rec.CreatedAt) {
			t.Errorf("read created_at %s, Put returned %s", got[0].CreatedAt, rec.CreatedAt)
		}
	}},
	{"ReturnsCopies", func(t *testing.T, s runevents.Store) {
		e := withMeta(msg("t1", "r1"), `{"caller":"lead_agent"}`)
		rec := put(t, s, e)
		want := rec.Clone()
		e.Content[2], e.Metadata[2] = 'X', 'X'
		rec.Content[2], rec.Metadata[2] = 'Y', 'Y'
		batch := putBatch(t, s, []runevents.NewEvent{trace("t1", "r1")})
		wantBatch := batch[0].Clone()
		batch[0].Content[2] = 'Z'
		read := runRows(t, s, "t1", "r1", asAlice)
		read[0].Content[2], read[0].Metadata[2] = 'W', 'W'
		reads := [][]runevents.Record{
			listMessages(t, s, runevents.ListMessagesParams{ThreadID: "t1", Owner: asAlice, Limit: 10}),
			listMessagesByRun(t, s, runevents.ListMessagesByRunParams{ThreadID: "t1", RunID: "r1", Owner: asAlice, Limit: 10}),
		}
		for _, got := range reads {
			sameRecords(t, "message after mutating returned copies", got, []runevents.Record{want})
			got[0].Content[2] = 'V'
		}
		sameRecords(t, "rows after mutating returned copies", runRows(t, s, "t1", "r1", asAlice), []runevents.Record{want, wantBatch})
		existing, created, err := s.PutIfAbsent(t.Context(), msg("t1", "r1"))
		if err != nil || created {
			t.Fatalf("PutIfAbsent = created %v, %v; want existing row", created, err)
		}
		existing.Content[2] = 'U'
		sameRecords(t, "rows after mutating PutIfAbsent's copy", runRows(t, s, "t1", "r1", asAlice), []runevents.Record{want, wantBatch})
	}},
	{"TraceTruncation", func(t *testing.T, s runevents.Store) {
		const limit = runevents.DefaultMaxTraceContent
		ascii := strings.Repeat("x", 20000)
		// A three-byte rune straddles the limit: the cut drops it whole.
		straddle := strings.Repeat("a", limit-1) + "€" + strings.Repeat("b", 20000-limit-2)
		structured, _ := json.Marshal(map[string]string{"text": strings.Repeat("é", 10000)})
		cases := []struct {
			name, content string
			cat           runevents.Category
			wantText      string // "" when stored whole
			wantLen       int
		}{
			{"ascii trace", mustJSON(ascii), runevents.CategoryTrace, ascii[:limit], 20000},
			{"straddling rune", mustJSON(straddle), runevents.CategoryTrace, straddle[:limit-1], 20000},
			{"structured trace", string(structured), runevents.CategoryTrace, truncUTF8(string(structured), limit), len(structured)},
			{"exactly the limit", mustJSON(ascii[:limit]), runevents.CategoryTrace, "", 0},
			{"message stored whole", mustJSON(ascii), runevents.CategoryMessage, "", 0},
			{"outputs stored whole", string(structured), runevents.CategoryOutputs, "", 0},
		}
		for i, c := range cases {
			run := "r" + string(rune('a'+i))
			e := withMeta(ev("t1", run, runevents.EventLLMError, c.cat, c.content), `{"caller":"lead_agent"}`)
			rec := put(t, s, e)
			got := runRows(t, s, "t1", run, asAlice)
			if len(got) != 1 {
				t.Fatalf("%s: %d rows, want 1", c.name, len(got))
			}
			sameRecord(t, c.name+": read vs Put", got[0], rec)
			var meta map[string]any
			if err := json.Unmarshal(got[0].Metadata, &meta); err != nil {
				t.Fatalf("%s: metadata %s: %v", c.name, got[0].Metadata, err)
			}
			if meta["caller"] != "lead_agent" {
				t.Errorf("%s: metadata %s lost the writer's keys", c.name, got[0].Metadata)
			}
			if c.wantText == "" {
				if string(got[0].Content) != c.content || meta["content_truncated"] != nil || meta["original_byte_length"] != nil {
					t.Errorf("%s: stored %d bytes with metadata %s, want the content whole and no truncation marks", c.name, len(got[0].Content), got[0].Metadata)
				}
				continue
			}
			var text string
			if err := json.Unmarshal(got[0].Content, &text); err != nil {
				t.Errorf("%s: truncated content is not a JSON string: %v", c.name, err)
			}
			if text != c.wantText {
				t.Errorf("%s: truncated to %d bytes, want %d bytes (prefix cut at a rune boundary)", c.name, len(text), len(c.wantText))
			}
			if meta["content_truncated"] != true || meta["original_byte_length"] != float64(c.wantLen) {
				t.Errorf("%s: metadata content_truncated=%v original_byte_length=%v, want true and %d", c.name, meta["content_truncated"], meta["original_byte_length"], c.wantLen)
			}
		}
	}},
}

func checkTime(t *testing.T, what string, got, want time.Time) {
	t.Helper()
	_, gotOff := got.Zone()
	_, wantOff := want.Zone()
	if !got.Equal(want) || gotOff != wantOff {
		t.Errorf("%s created_at %s, want %s", what, got.Format(time.RFC3339Nano), want.Format(time.RFC3339Nano))
	}
}

func mustJSON(s string) string {
	b, err := json.Marshal(s)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// truncUTF8 cuts s to at most n bytes at a rune boundary.
func truncUTF8(s string, n int) string {
	if n >= len(s) {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
