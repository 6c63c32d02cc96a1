package workflow

import (
	"strings"
	"testing"
)

// A not-found answer names an id runstream could have made; of anything
// else it gives back a short redacted excerpt.
func TestNotFoundQuotesTheID(t *testing.T) {
	secret := "sk-" + strings.Repeat("Ab3", 16)
	for _, c := range []struct{ id, want, gone string }{
		{"run_01a235c7-1406-7267-9c27-aaea1b2c3d4e", `workflow run "run_01a235c7-1406-7267-9c27-aaea1b2c3d4e" not found`, ""},
		{strings.Repeat("w", 300), `workflow run "www`, strings.Repeat("w", 40)},
		{secret, "workflow run ", secret[:10]},
		{`a"b`, `workflow run "a\"b" not found`, ""},
	} {
		got := RunNotFound(c.id).Error()
		if !strings.Contains(got, c.want) || (c.gone != "" && strings.Contains(got, c.gone)) {
			t.Errorf("RunNotFound(%.40q) = %q: want %q in it and %q not", c.id, got, c.want, c.gone)
		}
	}
}
