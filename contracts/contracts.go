// Package contracts holds runstream's JSON contracts as data: the error
// codes, the run-event stream catalogue and the workflow event protocol, plus
// the fixtures that exemplify every event of them. It embeds the files, so
// the server can publish them unchanged, and validates values against the
// JSON Schemas (draft 2020-12) the contracts contain.
//
// Go constants are generated from the same files (internal/contractgen);
// conformance tests keep the two in step.
package contracts

import (
	"embed"
	"io/fs"
)

// Names of the contract files, as the server serves them under
// /api/contracts/{name} and as they appear in FS.
const (
	ErrorsFile         = "errors.json"
	RunEventStreamFile = "run_event_stream.json"
	WorkflowEventsFile = "workflow_events.v1.json"
)

//go:embed errors.json run_event_stream.json workflow_events.v1.json fixtures
var files embed.FS

// FS returns the embedded contract files and, under fixtures/, one example
// per event: fixtures/workflow/<event>.json holds a full workflow envelope,
// fixtures/run_events/<event_type with ':' as '_'>.json a full run-event
// record, and fixtures/event_envelope_example.json the protocol's example
// envelope.
func FS() fs.FS { return files }

// Names returns the file names of the contracts in FS, in a stable order.
// Each is a JSON document the server may publish as it is.
func Names() []string {
	return []string{ErrorsFile, RunEventStreamFile, WorkflowEventsFile}
}
