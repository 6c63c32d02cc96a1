// Package crashtest holds black-box tests of the runstream binary: it is
// built, served on SQLite and on PostgreSQL, killed with SIGKILL under
// load and restarted, and the producers' acknowledgements and the
// followers' transcripts are checked against the store. See
// docs/RELIABILITY.md. The package has no code besides its tests.
package crashtest
