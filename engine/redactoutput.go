package engine

import (
	"encoding/json"
	"fmt"

	"github.com/runstream/runstream/redact"
)

// outputRedactor cleans node outputs as the event log cleans events.
var outputRedactor = redact.New(redact.Options{})

// RedactOutput returns a node output with its secrets and hidden
// reasoning removed by the redact package, the one redactor: raw HTTP and
// SQL results, human input values and llm outputs are stored, passed to
// downstream nodes and made artifacts only in this form.
func RedactOutput(out json.RawMessage) (json.RawMessage, error) {
	redacted, _, err := outputRedactor.JSON(out)
	if err != nil {
		return nil, fmt.Errorf("redact output: %w", err)
	}
	return redacted, nil
}
