package contracts_test

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"path"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/runstream/runstream/contracts"
)

// validator is compiled once for all tests, as the server does.
var validator = sync.OnceValues(contracts.NewValidator)

func newValidator(t testing.TB) *contracts.Validator {
	t.Helper()
	v, err := validator()
	if err != nil {
		t.Fatalf("NewValidator: %v", err)
	}
	return v
}

// readJSON decodes a file of the embedded FS keeping numbers exact.
func readJSON(t testing.TB, name string) any {
	t.Helper()
	raw, err := fs.ReadFile(contracts.FS(), name)
	if err != nil {
		t.Fatal(err)
	}
	return decodeJSON(t, raw)
}

func decodeJSON(t testing.TB, raw []byte) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("decode: %v", err)
	}
	return v
}

func mustMarshal(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// fixture is one example file with the schemas that govern it, found in the
// contract independently of the validator.
type fixture struct {
	name string // path in contracts.FS()
	raw  []byte
	// schemas maps a JSON Pointer inside the fixture ("" for the whole) to
	// the schema that applies there.
	schemas map[string]any
	// root is the contract document, for resolving "#/…" references.
	root map[string]any
}

// contractDocs holds the two event contracts decoded as generic JSON.
type contractDocs struct {
	workflow, runEvents map[string]any
}

func loadContracts(t testing.TB) contractDocs {
	t.Helper()
	return contractDocs{
		workflow:  readJSON(t, contracts.WorkflowEventsFile).(map[string]any),
		runEvents: readJSON(t, contracts.RunEventStreamFile).(map[string]any),
	}
}

func (c contractDocs) workflowEvents() map[string]map[string]any {
	out := map[string]map[string]any{}
	for _, e := range c.workflow["events"].([]any) {
		e := e.(map[string]any)
		out[e["event"].(string)] = e
	}
	return out
}

func (c contractDocs) workflowEventNames() []string {
	var names []string
	for _, e := range c.workflow["events"].([]any) {
		names = append(names, e.(map[string]any)["event"].(string))
	}
	return names
}

func (c contractDocs) runEventTypes() map[string]map[string]any {
	out := map[string]map[string]any{}
	for _, e := range c.runEvents["events"].([]any) {
		e := e.(map[string]any)
		out[e["event_type"].(string)] = e
	}
	return out
}

func (c contractDocs) alias() (alias, canonical string) {
	a := c.runEvents["legacy_event_aliases"].([]any)[0].(map[string]any)
	return a["event_type"].(string), a["canonical_event_type"].(string)
}

func (c contractDocs) middlewarePattern() (prefix string, pattern map[string]any) {
	p := c.runEvents["dynamic_event_patterns"].([]any)[0].(map[string]any)
	return strings.TrimSuffix(p["pattern"].(string), "{tag}"), p
}

// fixtureFile names the run-event fixture of an event type.
func fixtureFile(eventType string) string {
	return strings.ReplaceAll(eventType, ":", "_") + ".json"
}

func workflowFixtures(t testing.TB, c contractDocs) []fixture {
	t.Helper()
	events := c.workflowEvents()
	names, err := fs.Glob(contracts.FS(), "fixtures/workflow/*.json")
	if err != nil {
		t.Fatal(err)
	}
	names = append(names, "fixtures/event_envelope_example.json")
	var out []fixture
	for _, name := range names {
		raw, err := fs.ReadFile(contracts.FS(), name)
		if err != nil {
			t.Fatal(err)
		}
		event, _ := decodeJSON(t, raw).(map[string]any)["event"].(string)
		e, ok := events[event]
		if !ok {
			t.Fatalf("%s: event %q is not in the contract", name, event)
		}
		out = append(out, fixture{
			name: name,
			raw:  raw,
			root: c.workflow,
			schemas: map[string]any{
				"":      c.workflow["envelope_schema"],
				"/data": e["data_schema"],
			},
		})
	}
	return out
}

func runEventFixtures(t testing.TB, c contractDocs) []fixture {
	t.Helper()
	types := c.runEventTypes()
	alias, canonical := c.alias()
	prefix, pattern := c.middlewarePattern()
	names, err := fs.Glob(contracts.FS(), "fixtures/run_events/*.json")
	if err != nil {
		t.Fatal(err)
	}
	var out []fixture
	for _, name := range names {
		raw, err := fs.ReadFile(contracts.FS(), name)
		if err != nil {
			t.Fatal(err)
		}
		eventType, _ := decodeJSON(t, raw).(map[string]any)["event_type"].(string)
		if path.Base(name) != fixtureFile(eventType) {
			t.Fatalf("%s holds event type %q, want file %s", name, eventType, fixtureFile(eventType))
		}
		def, ok := types[eventType]
		switch {
		case ok:
		case eventType == alias:
			// The canonical content; the alias's own metadata schema when
			// it has one.
			def = map[string]any{"content_schema": types[canonical]["content_schema"], "metadata_schema": types[canonical]["metadata_schema"]}
			if m, ok := c.runEvents["legacy_event_aliases"].([]any)[0].(map[string]any)["metadata_schema"]; ok {
				def["metadata_schema"] = m
			}
		case strings.HasPrefix(eventType, prefix):
			def = pattern
		default:
			t.Fatalf("%s: event type %q is not in the contract", name, eventType)
		}
		out = append(out, fixture{
			name: name,
			raw:  raw,
			root: c.runEvents,
			schemas: map[string]any{
				"":          c.runEvents["record_schema"],
				"/content":  def["content_schema"],
				"/metadata": def["metadata_schema"],
			},
		})
	}
	return out
}

func TestNamesAreServedContracts(t *testing.T) {
	t.Parallel()
	want := []string{"errors.json", "run_event_stream.json", "workflow_events.v1.json"}
	if got := contracts.Names(); !slices.Equal(got, want) {
		t.Fatalf("Names() = %v, want %v", got, want)
	}
	for _, name := range contracts.Names() {
		raw, err := fs.ReadFile(contracts.FS(), name)
		if err != nil {
			t.Fatalf("FS has no %s: %v", name, err)
		}
		if !json.Valid(raw) {
			t.Errorf("%s is not valid JSON", name)
		}
	}
}

// TestFixtureSet fails when a contract entry has no fixture, or a fixture no
// contract entry.
func TestFixtureSet(t *testing.T) {
	t.Parallel()
	c := loadContracts(t)

	t.Run("workflow", func(t *testing.T) {
		var want []string
		for _, name := range c.workflowEventNames() {
			want = append(want, "fixtures/workflow/"+name+".json")
		}
		slices.Sort(want)
		got, err := fs.Glob(contracts.FS(), "fixtures/workflow/*")
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("workflow fixtures:\n got %v\nwant %v", got, want)
		}
	})

	t.Run("run_events", func(t *testing.T) {
		alias, _ := c.alias()
		prefix, _ := c.middlewarePattern()
		want := []string{"fixtures/run_events/" + fixtureFile(alias)}
		for eventType := range c.runEventTypes() {
			want = append(want, "fixtures/run_events/"+fixtureFile(eventType))
		}
		got, err := fs.Glob(contracts.FS(), "fixtures/run_events/*")
		if err != nil {
			t.Fatal(err)
		}
		var middleware []string
		got = slices.DeleteFunc(got, func(name string) bool {
			if strings.HasPrefix(path.Base(name), strings.ReplaceAll(prefix, ":", "_")) {
				middleware = append(middleware, name)
				return true
			}
			return false
		})
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("run-event fixtures:\n got %v\nwant %v", got, want)
		}
		if len(middleware) != 1 {
			t.Errorf("middleware fixtures = %v, want exactly one", middleware)
		}
	})
}

func TestFixturesValidate(t *testing.T) {
	t.Parallel()
	v := newValidator(t)
	c := loadContracts(t)
	for _, f := range workflowFixtures(t, c) {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			if err := v.ValidateWorkflowEnvelope(f.raw); err != nil {
				t.Fatal(err)
			}
		})
	}
	for _, f := range runEventFixtures(t, c) {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			if err := v.ValidateRunEventRecord(f.raw); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestWorkflowFixtureScopes checks the fixtures against the scope of their
// event, independently of the validator's own scope rule.
func TestWorkflowFixtureScopes(t *testing.T) {
	t.Parallel()
	c := loadContracts(t)
	events := c.workflowEvents()
	for _, f := range workflowFixtures(t, c) {
		env := decodeJSON(t, f.raw).(map[string]any)
		scope := events[env["event"].(string)]["scope"]
		for _, key := range []string{"nodeId", "nodeRunId"} {
			_, isString := env[key].(string)
			if isString != (scope == "node") {
				t.Errorf("%s: %s = %v for a %v-scoped event", f.name, key, env[key], scope)
			}
		}
	}
}
