// Package sse writes and reads text/event-stream (server-sent events): the
// server's SSE endpoints write with it, and the Go client, the CLI's tail
// and the tests read with it.
//
// # Writing
//
// A Frame is written as
//
//	id: 42
//	event: node.output.delta
//	data: {"schemaVersion":"1.0",...}
//
// followed by a blank line. The id line is left out when ID is empty (the
// synthesised terminal frame has no id, so a client resuming after it
// resumes from the last stored event), and the event line when Event is
// empty. [Writer.WriteComment] writes ": heartbeat" and [Writer.WriteRetry]
// the reconnection hint "retry: 3000". [AppendFrame] and its siblings encode
// into a caller's buffer, so a server can batch frames into one write.
//
// Data is always exactly one line. Our payloads are compact JSON, in which
// CR and LF can only appear escaped; a raw CR or LF in data would therefore
// be a bug upstream, and splitting it over several data lines would only
// hide it. The writer refuses it instead, as it refuses CR, LF and NUL in
// ids, event names and comments: CR and LF would end the line early, so the
// rest of the value would be parsed as another field (a forged id or event
// from the payload); a reader ignores an id containing NUL, so the frame
// would arrive under the previous id and break resume. Invalid UTF-8 is
// refused too, since a reader replaces it with U+FFFD. A refused value
// yields a *FieldError (matching ErrInvalidField) and nothing is written,
// so a stream is never left holding half a frame. Everything the writer
// accepts reads back unchanged; a fuzz test checks this.
//
// # Reading
//
// [Reader] follows the WHATWG HTML specification's event stream
// interpretation exactly, not just what our server writes: UTF-8 decoding
// with U+FFFD for invalid sequences, one leading BOM stripped, CRLF, LF and
// CR line endings (also split across reads), comments, fields with or
// without a colon and one optional space after it, data lines joined with
// "\n", the last event ID kept across events, ids containing NUL ignored,
// retry only when all ASCII digits, dispatch on a blank line, no event for
// an empty data buffer, and an event cut off by the end of the stream
// discarded. Event.Event is the raw type ("" when absent); Event.Type
// applies the "message" default. Comments are returned only on request.
//
// Lines and event data are bounded (1 MiB and 4 MiB by default), so a
// hostile or broken stream yields an error rather than unbounded memory.
package sse
