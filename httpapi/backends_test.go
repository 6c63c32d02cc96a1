package httpapi

import (
	"testing"

	"github.com/runstream/runstream/internal/backendtest"
)

// threadBackend opens new, empty thread stores of one backend for a test.
type threadBackend = backendtest.Backend

var memoryBackend = backendtest.Memory

// forEachThreadBackend runs test as a subtest per backend: memory, SQLite,
// JSONL (run events; the rest in SQLite), and PostgreSQL when
// RUNSTREAM_TEST_POSTGRES_URL is set (the subtest skips with a message
// otherwise).
func forEachThreadBackend(t *testing.T, test func(t *testing.T, b threadBackend)) {
	backendtest.ForEach(t, test)
}
