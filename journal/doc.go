// Package journal turns the callbacks of a Go agent run into the run
// events of its thread (reference §3): one Journal per run, fed by an agent
// loop or a framework adapter (journal/langchaingo, journal/eino) at the
// callback moments of the original RunJournal: root chain start, end and
// error; chat model start with the prompt and tags; model end with the
// generated messages, call id, usage and model name; model error; tool end
// with a tool message or a state update carrying messages and artifacts.
//
// # Events
//
//   - run.start and run.end for root chains only (ParentID empty); run.error
//     for every chain error; run.end and run.error start a background flush.
//   - llm.human.input at most once per run: the latest qualifying human
//     message of a lead-agent prompt (visible, not a summary, or a hidden
//     structured ask_clarification reply), written as its UI copy
//     (original_user_content restored). Unlike the original, a capture
//     with empty text (an image-only prompt) still ends capture for the run.
//   - llm.ai.response per generated message with metadata {caller, usage,
//     latency_ms, llm_call_index}: caller from the tags (CallerOf), the
//     index run-wide from 1, latency from the matching start. Unlike the
//     original, a repeated end callback for one call id writes no second row.
//   - llm.tool.result per tool message, and at root chain end for a
//     clarification tool message of the output no tool end recorded.
//   - middleware:{tag} (RecordMiddleware); context:memory once per journal
//     (RecordMemoryContext); run.delivery once per run (RecordDelivery,
//     through AppendIfAbsent, three attempts).
//
// # Buffering
//
// Events are buffered in memory. When FlushThreshold (default 20) are
// buffered, or after run.end and run.error, a background flush writes the
// whole buffer in one Sink.Append, unless one is already writing: at most
// one write is in flight, so events reach the sink in the order they were
// recorded. A failed background flush is logged and its batch put back at
// the front of the buffer for the next flush. Callbacks never wait for the
// sink. Flush(ctx) waits for the write in flight, then drains the buffer in
// order in chunks of FlushThreshold and returns the first error (the chunk
// stays buffered for a later Flush).
//
// # Token accounting
//
// Usage is counted once per model call id that reports tokens (a first end
// without usage does not block a later one): run totals, the caller bucket
// (lead agent, subagent:, middleware:), the model bucket (response_metadata
// model_name, else model, else "unknown"), and the call count. The Summary
// adds the message count, the first human text and the last lead AI text.
// Options.Progress receives snapshots after usage is counted, no more
// often than ProgressInterval (default 5s): a report is immediate when the
// last is old enough, otherwise one delayed report is scheduled; Flush
// waits for a report in flight and cancels a delayed one. Complete writes
// the final run row (Summary.RunRow).
//
// # Sinks
//
// A Journal writes through a Sink: ServiceSink in process (through the
// thread service and its event log, so every event is validated and
// redacted), or producer.Sink over the HTTP ingest.
package journal
