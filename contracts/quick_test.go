package contracts

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// quickCase is one schema of the catalogue with its quick form.
type quickCase struct {
	name  string
	full  *jsonschema.Schema
	quick *quickSchema
}

func quickCases(t *testing.T) []quickCase {
	t.Helper()
	v, err := NewValidator()
	if err != nil {
		t.Fatal(err)
	}
	var cases []quickCase
	add := func(name string, s runEventSchema) {
		cases = append(cases, quickCase{name + "/content", s.content, s.quickContent}, quickCase{name + "/metadata", s.metadata, s.quickMetadata})
	}
	for name, s := range v.runEvents {
		add(name, s)
	}
	add("middleware", v.middleware.runEventSchema)
	slices.SortFunc(cases, func(a, b quickCase) int { return strings.Compare(a.name, b.name) })
	return cases
}

// The schemas of the events producers send most have a quick form, so
// that their ingest skips the schema library.
func TestQuickSchemaCoverage(t *testing.T) {
	have := map[string]bool{}
	for _, c := range quickCases(t) {
		have[c.name] = c.quick != nil
	}
	for _, name := range []string{
		"run.start/content", "run.start/metadata", "run.end/content", "run.end/metadata",
		"llm.human.input/content", "llm.human.input/metadata",
	} {
		if !have[name] {
			t.Errorf("%s has no quick form", name)
		}
	}
}

// The quick form never accepts what the schema library refuses: random
// values built from the schemas' own names and constants, valid and
// broken, escaped and not.
func TestQuickSchemaNeverAcceptsInvalid(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 2))
	for _, c := range quickCases(t) {
		if c.quick == nil {
			continue
		}
		accepted, refused := 0, 0
		for range 3000 {
			raw := json.RawMessage(sampleJSON(rnd, c.quick, 0))
			doc, err := decode(raw)
			if err != nil {
				t.Fatalf("%s: the generator wrote %s: %v", c.name, raw, err)
			}
			libraryOK := c.full.Validate(doc) == nil
			if quickAccepts(c.quick, raw) {
				accepted++
				if !libraryOK {
					t.Errorf("%s: the quick form accepts %s, which the schema refuses", c.name, raw)
				}
			} else if libraryOK {
				refused++
			}
		}
		if accepted == 0 {
			t.Errorf("%s: the quick form accepted none of the samples", c.name)
		}
		t.Logf("%s: quick accepted %d, left %d valid ones to the library", c.name, accepted, refused)
	}
}

// The quick form accepts what the library accepts for the common shapes:
// the ingest path's events take it.
func TestValidateRunEventQuick(t *testing.T) {
	v, err := NewValidator()
	if err != nil {
		t.Fatal(err)
	}
	s, _, _ := v.runEventSchema("run.start")
	content, metadata := json.RawMessage(`{"chain":"lead_agent","x":[1,{"y":null}]}`), json.RawMessage(` {"caller":"lead_agent"} `)
	if !quickAccepts(s.quickContent, content) || !quickAccepts(s.quickMetadata, metadata) {
		t.Error("a run.start event does not take the quick path")
	}
	if err := v.ValidateRunEvent("run.start", content, metadata); err != nil {
		t.Error(err)
	}
	// Refused alike with and without the quick path: it falls back.
	err = v.ValidateRunEvent("run.start", json.RawMessage(`{"chain":1}`), metadata)
	if ve, ok := err.(*ValidationError); !ok || len(ve.Problems) != 1 || ve.Problems[0].Path != "/content/chain" {
		t.Errorf("a wrong chain: %v", err)
	}
}

// sampleJSON writes a random JSON value for q: usually the shape q asks
// for, with its names and constants, sometimes broken (a member dropped,
// a type changed, a string escaped).
func sampleJSON(rnd *rand.Rand, q *quickSchema, depth int) string {
	if rnd.IntN(8) == 0 || depth > 3 {
		return randomJSON(rnd, depth)
	}
	if q.constant != nil {
		if rnd.IntN(4) == 0 && q.constant[0] == '"' {
			// The same text with an escape: equal for the library.
			s := string(q.constant[1 : len(q.constant)-1])
			if s != "" {
				return `"\u00` + fmt.Sprintf("%02x", s[0]) + s[1:] + `"`
			}
		}
		return string(q.constant)
	}
	if q.types != 0 && q.types&typeObject == 0 {
		return scalarOf(rnd, q.types)
	}
	var members []string
	for _, name := range q.required {
		if rnd.IntN(10) > 0 {
			members = append(members, fmt.Sprintf("%q:%s", name, sampleOf(rnd, q.properties[name], depth)))
		}
	}
	for name, sub := range q.properties {
		if !slices.Contains(q.required, name) && rnd.IntN(2) == 0 {
			members = append(members, fmt.Sprintf("%q:%s", name, sampleOf(rnd, sub, depth)))
		}
	}
	if rnd.IntN(3) == 0 {
		members = append(members, `"extra":`+randomJSON(rnd, depth+1))
	}
	rnd.Shuffle(len(members), func(i, j int) { members[i], members[j] = members[j], members[i] })
	return "{" + strings.Join(members, ",") + "}"
}

func sampleOf(rnd *rand.Rand, q *quickSchema, depth int) string {
	if q == nil {
		return randomJSON(rnd, depth+1)
	}
	return sampleJSON(rnd, q, depth+1)
}

// scalarOf writes a value of one of types, or of another type now and then.
func scalarOf(rnd *rand.Rand, types jsonTypes) string {
	for range 8 {
		v := randomJSON(rnd, 3)
		if types&typeOf([]byte(v)) != 0 || rnd.IntN(6) == 0 {
			return v
		}
	}
	return "null"
}

// randomJSON writes any JSON value, nested at most 4 deep.
func randomJSON(rnd *rand.Rand, depth int) string {
	n := 10
	if depth < 4 {
		n = 12
	}
	switch rnd.IntN(n) {
	case 0:
		return "null"
	case 1:
		return "true"
	case 2:
		return "false"
	case 3:
		return []string{"0", "1", "-2.5", "1e3", "1.0"}[rnd.IntN(5)]
	case 4:
		return `""`
	case 5, 6:
		return fmt.Sprintf("%q", []string{"human", "lead_agent", "success", "ai", "tool", "x y", "é"}[rnd.IntN(7)])
	case 7:
		return `"a\nb\u0041"`
	case 8, 9:
		return `"` + strings.Repeat("z", rnd.IntN(20)) + `"`
	case 10:
		var items []string
		for range rnd.IntN(3) {
			items = append(items, randomJSON(rnd, depth+1))
		}
		return "[" + strings.Join(items, ",") + "]"
	}
	var members []string
	for i := range rnd.IntN(3) {
		members = append(members, fmt.Sprintf(`"%s%d":%s`, []string{"type", "content", "caller", "status", "chain", "k"}[rnd.IntN(6)], i, randomJSON(rnd, depth+1)))
	}
	return "{" + strings.Join(members, ",") + "}"
}

// BenchmarkValidateRunEvent compares an ingest event's check on the quick
// path with the same check through the schema library (a validator
// without the quick forms), in one run.
func BenchmarkValidateRunEvent(b *testing.B) {
	quick, err := NewValidator()
	if err != nil {
		b.Fatal(err)
	}
	library := *quick
	library.runEvents = map[string]runEventSchema{}
	for name, s := range quick.runEvents {
		s.quickContent, s.quickMetadata = nil, nil
		library.runEvents[name] = s
	}
	content := json.RawMessage(`{"chain":"` + strings.Repeat("x", 150) + `"}`)
	metadata := json.RawMessage(`{"caller":"lead_agent"}`)
	for _, bc := range []struct {
		name string
		v    *Validator
	}{{"Quick", quick}, {"Library", &library}} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				if err := bc.v.ValidateRunEvent("run.start", content, metadata); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
