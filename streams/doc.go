// Package streams defines runstream's followed streams as the live hub
// sees them: the hub key of each stream (a workflow run, a view of a
// thread), the SSE frame of each stored event (sse.AppendSeqFrame), and
// the poll that reads a stream's stored events by its key.
//
// eventlog publishes every committed event under the keys that show it;
// the services open followers on them; the hub polls the stores through
// StreamPoller.
package streams
