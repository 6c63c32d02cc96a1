package contracts

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// baseURL names the contract documents inside the schema compiler. Nothing is
// ever fetched from it: every document is added as a resource up front.
const baseURL = "https://contracts.runstream.invalid/"

// Validator checks workflow envelopes and run events against the JSON Schemas
// of the contracts. It compiles every schema once, in NewValidator, and is
// safe for concurrent use.
//
// Every method returns nil or a *ValidationError whose problems carry JSON
// Pointers into the validated value.
type Validator struct {
	envelope      *jsonschema.Schema
	workflowData  map[string]*jsonschema.Schema
	workflowScope map[string]string // "run" or "node"

	record     *jsonschema.Schema
	runEvents  map[string]runEventSchema // catalogued event types
	aliases    map[string]string         // legacy alias → canonical type, for aliases without schemas of their own
	middleware middlewarePattern
}

type runEventSchema struct {
	category string
	content  *jsonschema.Schema
	metadata *jsonschema.Schema
	// quickContent and quickMetadata are the quick forms of content and
	// metadata, nil when they have none (quick.go).
	quickContent, quickMetadata *quickSchema
}

type middlewarePattern struct {
	prefix    string
	eventType *jsonschema.Schema
	tag       *jsonschema.Schema
	runEventSchema
}

// The parts of the contracts the validator reads besides the schemas.
type workflowDoc struct {
	Events []struct {
		Event string `json:"event"`
		Scope string `json:"scope"`
	} `json:"events"`
}

type runEventDoc struct {
	Events []struct {
		EventType string          `json:"event_type"`
		Category  string          `json:"category"`
		Content   json.RawMessage `json:"content_schema"`
		Metadata  json.RawMessage `json:"metadata_schema"`
	} `json:"events"`
	Aliases []struct {
		EventType string          `json:"event_type"`
		Canonical string          `json:"canonical_event_type"`
		Metadata  json.RawMessage `json:"metadata_schema"`
	} `json:"legacy_event_aliases"`
	Patterns []struct {
		Pattern  string          `json:"pattern"`
		Category string          `json:"category"`
		Content  json.RawMessage `json:"content_schema"`
		Metadata json.RawMessage `json:"metadata_schema"`
	} `json:"dynamic_event_patterns"`
}

// NewValidator compiles the schemas of the embedded contracts. An error means
// a contract file is broken; it does not depend on any input.
func NewValidator() (*Validator, error) {
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	var wf workflowDoc
	if err := addContract(c, WorkflowEventsFile, &wf); err != nil {
		return nil, err
	}
	var re runEventDoc
	if err := addContract(c, RunEventStreamFile, &re); err != nil {
		return nil, err
	}
	v := &Validator{
		workflowData:  map[string]*jsonschema.Schema{},
		workflowScope: map[string]string{},
		runEvents:     map[string]runEventSchema{},
		aliases:       map[string]string{},
	}
	var err error
	compile := func(file, ptr string) *jsonschema.Schema {
		if err != nil {
			return nil
		}
		var s *jsonschema.Schema
		if s, err = c.Compile(baseURL + file + "#" + ptr); err != nil {
			err = fmt.Errorf("new validator: compile %s#%s: %w", file, ptr, err)
		}
		return s
	}

	v.envelope = compile(WorkflowEventsFile, "/envelope_schema")
	for i, e := range wf.Events {
		v.workflowData[e.Event] = compile(WorkflowEventsFile, "/events/"+strconv.Itoa(i)+"/data_schema")
		v.workflowScope[e.Event] = e.Scope
	}

	v.record = compile(RunEventStreamFile, "/record_schema")
	for i, e := range re.Events {
		at := "/events/" + strconv.Itoa(i)
		v.runEvents[e.EventType] = runEventSchema{
			category:      e.Category,
			content:       compile(RunEventStreamFile, at+"/content_schema"),
			metadata:      compile(RunEventStreamFile, at+"/metadata_schema"),
			quickContent:  compileQuick(e.Content),
			quickMetadata: compileQuick(e.Metadata),
		}
	}
	if len(re.Patterns) != 1 {
		return nil, fmt.Errorf("new validator: want one dynamic event pattern, have %d", len(re.Patterns))
	}
	prefix, ok := strings.CutSuffix(re.Patterns[0].Pattern, "{tag}")
	if !ok {
		return nil, fmt.Errorf("new validator: dynamic pattern %q does not end in {tag}", re.Patterns[0].Pattern)
	}
	v.middleware = middlewarePattern{
		prefix:    prefix,
		eventType: compile(RunEventStreamFile, "/dynamic_event_patterns/0/event_type_schema"),
		tag:       compile(RunEventStreamFile, "/dynamic_event_patterns/0/tag_schema"),
		runEventSchema: runEventSchema{
			category:      re.Patterns[0].Category,
			content:       compile(RunEventStreamFile, "/dynamic_event_patterns/0/content_schema"),
			metadata:      compile(RunEventStreamFile, "/dynamic_event_patterns/0/metadata_schema"),
			quickContent:  compileQuick(re.Patterns[0].Content),
			quickMetadata: compileQuick(re.Patterns[0].Metadata),
		},
	}
	for i, a := range re.Aliases {
		canonical, ok := v.runEvents[a.Canonical]
		if !ok {
			return nil, fmt.Errorf("new validator: alias %q of unknown event type %q", a.EventType, a.Canonical)
		}
		if a.Metadata == nil {
			v.aliases[a.EventType] = a.Canonical
			continue
		}
		// An alias with a metadata schema of its own: the canonical
		// category and content, its own metadata.
		canonical.metadata = compile(RunEventStreamFile, "/legacy_event_aliases/"+strconv.Itoa(i)+"/metadata_schema")
		canonical.quickMetadata = compileQuick(a.Metadata)
		v.runEvents[a.EventType] = canonical
	}
	if err != nil {
		return nil, err
	}
	return v, nil
}

// addContract adds one contract document to the compiler as a schema
// resource, so that its sub-schemas compile by JSON Pointer and their
// "#/$defs/…" references resolve inside it, and decodes it into doc.
func addContract(c *jsonschema.Compiler, name string, doc any) error {
	raw, err := fs.ReadFile(files, name)
	if err != nil {
		return fmt.Errorf("new validator: %w", err)
	}
	if err := json.Unmarshal(raw, doc); err != nil {
		return fmt.Errorf("new validator: decode %s: %w", name, err)
	}
	v, err := decode(raw)
	if err != nil {
		return fmt.Errorf("new validator: decode %s: %w", name, err)
	}
	if err := c.AddResource(baseURL+name, v); err != nil {
		return fmt.Errorf("new validator: add %s: %w", name, err)
	}
	return nil
}

// ValidateWorkflowEnvelope checks one envelope of the workflow protocol: the
// envelope schema, the data schema of its event, and the scope rule (nodeId
// and nodeRunId are null for run-scoped events and strings for node-scoped
// ones). An event outside the closed set is a problem at /event.
func (v *Validator) ValidateWorkflowEnvelope(raw []byte) error {
	doc, err := decode(raw)
	if err != nil {
		return &ValidationError{Problems: []Problem{{Path: "", Message: err.Error()}}}
	}
	var problems []Problem
	if err := v.envelope.Validate(doc); err != nil {
		problems = schemaProblems(problems, "", err)
	}
	obj, ok := doc.(map[string]any)
	if !ok {
		return newValidationError(problems)
	}
	if event, ok := obj["event"].(string); ok {
		problems = v.checkWorkflowEvent(problems, event, obj)
	}
	if len(problems) > 0 {
		return newValidationError(problems)
	}
	return nil
}

func (v *Validator) checkWorkflowEvent(problems []Problem, event string, obj map[string]any) []Problem {
	schema, ok := v.workflowData[event]
	if !ok {
		return append(problems, Problem{Path: "/event", Message: "unknown event " + strconv.Quote(shorten(event))})
	}
	if data, ok := obj["data"]; ok {
		if err := schema.Validate(data); err != nil {
			problems = schemaProblems(problems, "/data", err)
		}
	}
	for _, key := range []string{"nodeId", "nodeRunId"} {
		val, present := obj[key]
		if !present {
			continue // reported as missing by the envelope schema
		}
		s, isString := val.(string)
		switch {
		case v.workflowScope[event] == "run" && val != nil:
			problems = append(problems, Problem{Path: "/" + key, Message: "must be null for the run-scoped event " + event})
		case v.workflowScope[event] == "node" && (val == nil || isString && s == ""):
			problems = append(problems, Problem{Path: "/" + key, Message: "must be a non-empty string for the node-scoped event " + event})
		}
	}
	return problems
}

// ValidateWorkflowData checks data against the data schema of event. data is
// a JSON value as json.Unmarshal into any produces it, a json.RawMessage, or
// any value json.Marshal accepts. Problem paths point into data.
func (v *Validator) ValidateWorkflowData(event string, data any) error {
	schema, ok := v.workflowData[event]
	if !ok {
		return &ValidationError{Problems: []Problem{{Path: "", Message: "unknown event " + strconv.Quote(shorten(event))}}}
	}
	val, err := jsonValue(data)
	if err != nil {
		return &ValidationError{Problems: []Problem{{Path: "", Message: err.Error()}}}
	}
	if err := schema.Validate(val); err != nil {
		return newValidationError(schemaProblems(nil, "", err))
	}
	return nil
}

// ValidateRunEventRecord checks one stored run-event record: the record
// schema, the category the contract assigns to its event type, and the
// content and metadata schemas of that type. The type is a catalogued one,
// one of the middleware:{tag} pattern, or the legacy alias, which validates
// with its canonical type's category and content schema and its own
// metadata schema when the contract gives it one (ai_message does: its
// rows predate usage, latency_ms and llm_call_index); any other type is a
// problem at /event_type.
func (v *Validator) ValidateRunEventRecord(raw []byte) error {
	doc, err := decode(raw)
	if err != nil {
		return &ValidationError{Problems: []Problem{{Path: "", Message: err.Error()}}}
	}
	var problems []Problem
	if err := v.record.Validate(doc); err != nil {
		problems = schemaProblems(problems, "", err)
	}
	obj, ok := doc.(map[string]any)
	if !ok {
		return newValidationError(problems)
	}
	if eventType, ok := obj["event_type"].(string); ok {
		schema, ok, typeProblems := v.runEventSchema(eventType)
		problems = append(problems, typeProblems...)
		if ok {
			if category, ok := obj["category"].(string); ok && category != schema.category {
				problems = append(problems, Problem{Path: "/category", Message: fmt.Sprintf("must be %q for event type %q", schema.category, shorten(eventType))})
			}
			problems = schema.check(problems, obj)
		}
	}
	if len(problems) > 0 {
		return newValidationError(problems)
	}
	return nil
}

// ValidateRunEvent checks the content and metadata of a run event of the
// given type, as an ingest request carries them before the store assigns the
// record's other fields. Types resolve as in ValidateRunEventRecord. Problem
// paths start with /event_type, /content or /metadata. content and metadata
// take the same forms as the data of ValidateWorkflowData.
func (v *Validator) ValidateRunEvent(eventType string, content, metadata any) error {
	schema, ok, problems := v.runEventSchema(eventType)
	if !ok {
		return newValidationError(problems)
	}
	if quickAccepts(schema.quickContent, content) && quickAccepts(schema.quickMetadata, metadata) {
		return nil
	}
	// Both members are converted before either is validated, so the
	// problems come in the order of ValidateRunEventRecord's: conversion
	// problems first, then the schemas', content before metadata.
	contentValue, contentErr := jsonValue(content)
	metadataValue, metadataErr := jsonValue(metadata)
	if contentErr != nil {
		problems = append(problems, Problem{Path: "/content", Message: contentErr.Error()})
	}
	if metadataErr != nil {
		problems = append(problems, Problem{Path: "/metadata", Message: metadataErr.Error()})
	}
	if contentErr == nil {
		problems = checkMember(problems, "/content", schema.content, contentValue)
	}
	if metadataErr == nil {
		problems = checkMember(problems, "/metadata", schema.metadata, metadataValue)
	}
	if len(problems) > 0 {
		return newValidationError(problems)
	}
	return nil
}

// runEventSchema resolves an event type to its schemas; when it cannot
// (ok false) the problems say why. The schemas are returned by value so
// that resolving one allocates nothing.
func (v *Validator) runEventSchema(eventType string) (s runEventSchema, ok bool, problems []Problem) {
	if canonical, ok := v.aliases[eventType]; ok {
		eventType = canonical
	}
	if s, ok := v.runEvents[eventType]; ok {
		return s, true, nil
	}
	if tag, ok := strings.CutPrefix(eventType, v.middleware.prefix); ok {
		if err := v.middleware.eventType.Validate(eventType); err != nil {
			return runEventSchema{}, false, schemaProblems(nil, "/event_type", err)
		}
		if err := v.middleware.tag.Validate(tag); err != nil {
			return runEventSchema{}, false, schemaProblems(nil, "/event_type", err)
		}
		return v.middleware.runEventSchema, true, nil
	}
	return runEventSchema{}, false, []Problem{{Path: "/event_type", Message: "unknown event type " + strconv.Quote(shorten(eventType))}}
}

// check validates the content and metadata members of obj that are present;
// missing members are the record schema's to report.
func (s *runEventSchema) check(problems []Problem, obj map[string]any) []Problem {
	if content, ok := obj["content"]; ok {
		problems = checkMember(problems, "/content", s.content, content)
	}
	if metadata, ok := obj["metadata"]; ok {
		problems = checkMember(problems, "/metadata", s.metadata, metadata)
	}
	return problems
}

// checkMember validates value against schema and appends what it finds
// wrong under path.
func checkMember(problems []Problem, path string, schema *jsonschema.Schema, value any) []Problem {
	if err := schema.Validate(value); err != nil {
		problems = schemaProblems(problems, path, err)
	}
	return problems
}
