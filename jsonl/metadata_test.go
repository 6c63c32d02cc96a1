package jsonl

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/runstream/runstream/runevents"
)

// referenceFilters reads the filters the way the other backends do.
func referenceFilters(meta []byte) (string, bool) {
	r := runevents.Record{Metadata: meta}
	taskID, _ := r.MetadataString("task_id")
	caller, _ := r.MetadataString("caller")
	return taskID, strings.HasPrefix(caller, runevents.MiddlewarePrefix)
}

var metadataSeeds = []string{
	`{}`,
	`{"task_id":"t-1"}`,
	`{"task_id":7,"caller":"middleware:guardrail"}`,
	`{"caller":"lead_agent","task_id":"a","task_id":"b"}`,
	`{"task_id":"a","TASK_ID":"b","Caller":"middleware:x"}`,
	`{"nested":{"task_id":"inner","caller":"middleware:x"},"task_id":"outer"}`,
	`{"a":[1,{"b":"}"}],"task_id":"x\"y\u00e9","caller":"middleware:\u0074ag"}`,
	`{"task\u005fid":"escaped key","c":"\\"}`,
	`{ "task_id" : "spaced" , "caller":"middleware:z" }`,
	`{"task_id":null,"caller":true}`,
	`{"x":"a,b}","task_id":"after"}`,
	`{"task_id":"` + "\u2028" + `"}`,
}

func TestMetadataFilters(t *testing.T) {
	t.Parallel()
	for _, meta := range metadataSeeds {
		for _, form := range []string{meta, compactJSON(t, meta)} {
			task, mw := metadataFilters([]byte(form))
			wantTask, wantMW := referenceFilters([]byte(form))
			if task != wantTask || mw != wantMW {
				t.Errorf("metadataFilters(%s) = %q, %v; want %q, %v", form, task, mw, wantTask, wantMW)
			}
		}
	}
}

func compactJSON(t testing.TB, s string) string {
	var b bytes.Buffer
	if err := json.Compact(&b, []byte(s)); err != nil {
		t.Fatalf("compact %s: %v", s, err)
	}
	return b.String()
}

func FuzzMetadataFilters(f *testing.F) {
	for _, s := range metadataSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, meta []byte) {
		task, mw := metadataFilters(meta) // must not panic on any input
		if !json.Valid(meta) {
			return
		}
		if wantTask, wantMW := referenceFilters(meta); task != wantTask || mw != wantMW {
			t.Errorf("metadataFilters(%q) = %q, %v; want %q, %v", meta, task, mw, wantTask, wantMW)
		}
		var b bytes.Buffer
		json.Compact(&b, meta)
		task, mw = metadataFilters(b.Bytes())
		if wantTask, wantMW := referenceFilters(b.Bytes()); task != wantTask || mw != wantMW {
			t.Errorf("metadataFilters(%q) = %q, %v; want %q, %v", b.Bytes(), task, mw, wantTask, wantMW)
		}
	})
}
