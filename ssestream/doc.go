// Package ssestream serves one SSE stream of stored events to one client:
// the follower loop, the connection it writes to — a ResponseWriter or a
// taken-over HTTP/1.x connection — and the set of open streams with its
// sweeper and shutdown.
//
// A Set's Serve answers with 200 and the SSE headers, then the follower's
// frames: it subscribes to the Source's live events first, replays the
// store after the cursor, goes on live, catches up from the store when its
// subscription is cut, sends heartbeats, and ends after the terminal
// event, at the end of its lifetime, or when the client leaves.
//
// On an HTTP/1.x connection the stream takes the connection over from
// net/http (http.ResponseController.Hijack), writes the response head and
// chunked body itself, and the handler returns. Its follower then parks
// when idle (after its catch-up and after each heartbeat): it waits with no
// goroutine, woken by callbacks on its context, its subscription and its
// heartbeat timer. An idle stream costs its subscription, its timers and
// the connection, instead of net/http's two goroutines per connection and
// its read, write and chunking buffers. Where a connection cannot be taken
// over (HTTP/2, a
// ResponseWriter of a test) the follower writes through the ResponseWriter
// on the handler's goroutine. Both write the same bytes; the taken-over
// connection closes when the stream ends.
//
// Nothing else reads a taken-over connection: the Set's sweeper checks
// each one every second (peerClosed) and ends the stream of a client that
// closed its end; where it cannot look at the socket, a client that left
// is noticed when a write to it fails, at the latest at the second
// heartbeat after it left. The sweeper also returns memory to the system
// once a storm of connections taken over is over (stormWatch): their
// net/http buffers are garbage the runtime would otherwise keep for
// minutes. Set.Shutdown ends the taken-over streams, which
// http.Server.Shutdown does not know of.
package ssestream
