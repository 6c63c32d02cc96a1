package postgres

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a test leaves goroutines behind: a store
// or a committer that Close did not stop.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
