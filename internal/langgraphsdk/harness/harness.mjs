// The LangGraph JS SDK harness of internal/langgraphsdk: it calls a
// runstream server with @langchain/langgraph-sdk exactly as DeerFlow's
// frontend does and prints what the SDK yields as JSON lines on stdout, for
// the Go test to compare with what its producer pushed.
//
//   node harness.mjs join   API_URL THREAD RUN [LAST_EVENT_ID [STREAM_MODE…]]
//   node harness.mjs get    API_URL THREAD RUN
//   node harness.mjs cancel API_URL THREAD RUN WAIT(0|1) ACTION
//
// Lines: {"kind":"request",…} for every HTTP request the SDK makes (with
// its Last-Event-ID), {"kind":"response",…} for its answer's status and
// Location, {"kind":"event",event,id,data} for every event joinStream
// yields, then {"kind":"done"}, or {"kind":"result",value} for get and
// cancel, or {"kind":"error",name,message,status} when the SDK throws.
import { Client } from "@langchain/langgraph-sdk";

const print = (line) => process.stdout.write(JSON.stringify(line) + "\n");

// loggingFetch is the SDK's fetch: it reports each request and answer.
async function loggingFetch(url, init) {
  const headers = new Headers(init?.headers);
  print({
    kind: "request",
    method: init?.method ?? "GET",
    url: String(url),
    last_event_id: headers.get("last-event-id"),
  });
  const response = await fetch(url, init);
  print({
    kind: "response",
    status: response.status,
    location: response.headers.get("location"),
    content_type: response.headers.get("content-type"),
  });
  return response;
}

const [command, apiUrl, threadId, runId, ...rest] = process.argv.slice(2);
const client = new Client({
  apiUrl,
  apiKey: null,
  callerOptions: { fetch: loggingFetch },
});

try {
  switch (command) {
    case "join": {
      const [lastEventId, ...streamMode] = rest;
      const options = { lastEventId: lastEventId || "-1" };
      if (streamMode.length > 0) options.streamMode = streamMode;
      for await (const part of client.runs.joinStream(threadId, runId, options)) {
        print({ kind: "event", event: part.event, id: part.id ?? null, data: part.data });
      }
      print({ kind: "done" });
      break;
    }
    case "get":
      print({ kind: "result", value: await client.runs.get(threadId, runId) });
      break;
    case "cancel": {
      const [wait, action] = rest;
      print({ kind: "result", value: (await client.runs.cancel(threadId, runId, wait === "1", action)) ?? null });
      break;
    }
    default:
      throw new Error(`unknown command ${command}`);
  }
} catch (error) {
  print({
    kind: "error",
    name: error?.name ?? null,
    message: String(error?.message ?? error),
    status: error?.status ?? null,
  });
  process.exitCode = 2;
}
