package runevents_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/runstream/runstream/runevents"
)

// referenceFilters reads the filters with Record.MetadataString, the
// definition FiltersOf must agree with.
func referenceFilters(meta []byte) runevents.Filters {
	r := runevents.Record{Metadata: meta}
	var f runevents.Filters
	f.TaskID, f.HasTaskID = r.MetadataString("task_id")
	caller, _ := r.MetadataString("caller")
	f.Middleware = strings.HasPrefix(caller, runevents.MiddlewarePrefix)
	return f
}

var metadataSeeds = []string{
	`{}`,
	`{"task_id":"t-1","caller":"lead_agent"}`,
	`{"task_id":7,"caller":"middleware:guardrail"}`,
	`{"task_id":null,"caller":null}`,
	`{"task_id":{"id":"x"},"caller":["middleware:x"]}`,
	`{"task_id":"a\u0000b","caller":"middleware:guardrail"}`,
	`{"task_id":"first","task_id":"second","caller":"x","caller":"middleware:late"}`,
	`{"TASK_ID":"upper","Caller":"middleware:x"}`,
	`{"caller":"middleware:"}`,
	`{"caller":"Middleware:x"}`,
	`{"caller":"subagent:middleware:x"}`,
	`{"nested":{"task_id":"inner","caller":"middleware:x"},"task_id":"outer"}`,
	`{"a":[1,{"b":"}"}],"task_id":"x\"y\u00e9","caller":"middleware:\u0074ag"}`,
	`{"task\u005fid":"escaped key","c":"\\"}`,
	`{ "task_id" : "spaced" , "caller":"middleware:z" }`,
	`{"x":"a,b}","task_id":"after"}`,
	`{"x":"\"task_id\":\"not a key\""}`,
	`{"task_id":"` + "\u2028" + `"}`,
	"{\"task_id\":\"\xff\"}",
	"{\"task_id\xff\":\"x\"}",
	`[]`,
}

func TestFiltersOfAgreesWithMetadataString(t *testing.T) {
	t.Parallel()
	for _, meta := range metadataSeeds {
		forms := []string{meta}
		var b bytes.Buffer
		if json.Compact(&b, []byte(meta)) == nil {
			forms = append(forms, b.String())
		}
		for _, form := range forms {
			if got, want := runevents.FiltersOf([]byte(form)), referenceFilters([]byte(form)); got != want {
				t.Errorf("FiltersOf(%s) = %+v, want %+v", form, got, want)
			}
		}
	}
}

func FuzzFiltersOf(f *testing.F) {
	for _, s := range metadataSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, meta []byte) {
		got := runevents.FiltersOf(meta) // must not panic on any input
		if !json.Valid(meta) {
			return
		}
		if want := referenceFilters(meta); got != want {
			t.Errorf("FiltersOf(%q) = %+v, want %+v", meta, got, want)
		}
		var b bytes.Buffer
		json.Compact(&b, meta)
		if got, want := runevents.FiltersOf(b.Bytes()), referenceFilters(b.Bytes()); got != want {
			t.Errorf("FiltersOf(%q) = %+v, want %+v", b.Bytes(), got, want)
		}
	})
}
