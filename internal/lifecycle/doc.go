// Package lifecycle holds a model-based test (pgregory.net/rapid) of the
// stores: random sequences of thread appends, idempotent appends and
// retries, workflow pauses, resumes with valid, used and wrong tokens,
// cancels, completions, reads from random cursors, and crashes (the store
// closed and reopened over the same data), checked against a reference
// model after every step, on the memory, SQLite and PostgreSQL backends.
// The package has no code besides its test.
package lifecycle
