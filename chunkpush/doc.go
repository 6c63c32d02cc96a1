// Package chunkpush pushes one LangGraph run's stream chunks to a runstream
// server through its push API (POST /api/runs/{r}/stream-chunks), for an
// agent that runs elsewhere and whose stream browsers join on runstream
// (docs/LANGGRAPH.md).
//
// A Stream numbers the chunks it is given 0, 1, 2, … (from the run's
// next_index when it opens) and sends them from one goroutine, one request
// at a time:
//
//   - Batching: a request carries the leading unacknowledged chunks, up to
//     MaxBatchChunks and MaxBatchBytes, sent once full, once its first chunk
//     has waited Linger, or when End is called.
//   - Idempotency: a chunk keeps its index across retries, and the server
//     ignores indexes below its next_index, so a batch the server stored
//     before its answer was lost is stored once.
//   - Retries: connection errors, timeouts and the answers 408, 425, 429 and
//     5xx are retried with exponential backoff and full jitter (MinBackoff to
//     MaxBackoff, Retry-After honoured up to MaxBackoff) until End's context
//     ends or Close is called.
//   - Gaps: a 409 with expected_index below what was sent (the server lost
//     acknowledged chunks) is answered by sending again from expected_index
//     when the Stream still keeps those chunks (RetainAcked), else the Stream
//     fails with ErrGap.
//   - Fencing: a 409 naming a stale epoch, or an answer with a greater epoch,
//     means another worker took the run over: the Stream fails with
//     ErrFenced and sends nothing more.
//   - Heartbeats: an empty push renews the run's lease when nothing was sent
//     for Heartbeat.
//   - Cancel: a cancel request in a push answer or in the control long-poll
//     (GET /api/runs/{r}/stream-control) is delivered once on Cancels.
//   - Back-pressure: at most MaxPending chunks wait for acknowledgement;
//     Push blocks beyond that.
//   - End sends what is left with the run's terminal status in the last
//     request and waits for its answer.
//
// Other answers (400, 401, 403, 404, 413, a 409 of another kind) are final:
// the Stream fails and Push, End and Err return the error. Open refuses a
// run that has ended already (ErrEnded).
package chunkpush
