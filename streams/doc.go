// Package streams defines runstream's followed streams as the live hub
// sees them: the hub key of each stream (a workflow run, a thread), the
// views of a thread its followers filter on, the SSE frame of each stored
// event (sse.AppendSeqFrame), and the poll that reads a stream's stored
// events by its key.
//
// eventlog publishes every committed event once, under its stream's key;
// the services open followers on them; the hub polls the stores through
// StreamPoller.
package streams
