package engine_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when a test leaves a goroutine behind: an
// engine, a runner or a timer flush that Stop did not end.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
