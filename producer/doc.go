// Package producer writes run events to a remote runstream server through
// its HTTP ingest (POST /api/threads/{t}/runs/{r}/events, and PUT of the
// run row): the Sink of the journal, subagent and workspace producers when
// the store is not in process.
//
// A Writer queues events and sends them from one goroutine, one request at
// a time, in queue order, so the server stores them in the order they were
// appended:
//
//   - Batching: a request carries the leading queued events of one run, up
//     to MaxBatchEvents and MaxBatchBytes, sent once full, once its first
//     event has waited Linger, or when the Writer closes.
//   - Idempotency: each batch gets one Idempotency-Key, kept across its
//     retries, so a batch the server committed before its answer was lost
//     is stored once.
//   - Retries: connection errors, timeouts and the answers 408, 409 (the
//     same key still in progress), 425, 429 and 5xx are retried with
//     exponential backoff and full jitter (MinBackoff to MaxBackoff,
//     Retry-After honoured up to MaxBackoff), until Close's context ends.
//     Other answers are final: the batch is dropped, logged and counted.
//   - Back-pressure: the queue holds at most QueueEvents events; a full
//     queue blocks Append, or, with ReportFull, makes it return
//     ErrQueueFull. It never grows without bound.
//   - Close(ctx) stops accepting events and drains the queue in order; what
//     is still queued when ctx ends is dropped and counted.
//   - Metrics counts what was sent, retried and dropped.
//
// AppendIfAbsent (the run.delivery receipt, context:memory) takes its turn
// in the queue and waits for the server's answer; PutRun is sent at once.
package producer
