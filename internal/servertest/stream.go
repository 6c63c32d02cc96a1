package servertest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/runstream/runstream/engine/enginetest"
	"github.com/runstream/runstream/sse"
	"github.com/runstream/runstream/workflow"
)

// Stream follows a run's SSE stream over HTTP, as a browser would; frames
// are read in the background.
type Stream struct {
	events chan streamEvent
	got    []workflow.Envelope
}

type streamEvent struct {
	env workflow.Envelope
	err error
}

// Follow opens the SSE stream of runID on the server at baseURL from the
// start. It fails the test unless the server answers 200.
func Follow(t testing.TB, baseURL, runID string) *Stream {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), "GET", baseURL+"/api/workflows/runs/"+runID+"/stream", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		t.Fatalf("stream: status %d", resp.StatusCode)
	}
	st := &Stream{events: make(chan streamEvent, 64)}
	go func() {
		defer resp.Body.Close()
		defer close(st.events)
		rd := sse.NewReader(resp.Body)
		for {
			ev, err := rd.Next()
			if err != nil {
				if err != io.EOF {
					st.events <- streamEvent{err: err}
				}
				return
			}
			var env workflow.Envelope
			err = json.Unmarshal([]byte(ev.Data), &env)
			if err == nil && (!ev.HasID || ev.ID != strconv.FormatInt(env.Seq, 10) || ev.Type() != string(env.Event)) {
				err = fmt.Errorf("frame id %q (has id %v), event %q do not match its envelope", ev.ID, ev.HasID, ev.Type())
			}
			st.events <- streamEvent{env: env, err: err}
		}
	}()
	return st
}

// Until reads frames until one of type typ (and node, when not empty)
// arrives, and returns it; it fails the test when the stream closes first
// or after 30 s.
func (st *Stream) Until(t testing.TB, typ workflow.EventType, node string) workflow.Envelope {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case ev, ok := <-st.events:
			if !ok {
				t.Fatalf("stream closed before %s %s; got:\n%s", typ, node, strings.Join(enginetest.Sequence(st.got), "\n"))
			}
			if ev.err != nil {
				t.Fatalf("stream: %v", ev.err)
			}
			st.got = append(st.got, ev.env)
			if ev.env.Event == typ && (node == "" || ev.env.NodeID == node) {
				return ev.env
			}
		case <-timeout:
			t.Fatalf("no %s %s within 30 s; got:\n%s", typ, node, strings.Join(enginetest.Sequence(st.got), "\n"))
		}
	}
}

// Rest reads frames until the server closes the stream and returns every
// frame read, Until's included; it fails the test after 60 s.
func (st *Stream) Rest(t testing.TB) []workflow.Envelope {
	t.Helper()
	timeout := time.After(60 * time.Second)
	for {
		select {
		case ev, ok := <-st.events:
			if !ok {
				return st.got
			}
			if ev.err != nil {
				t.Fatalf("stream: %v", ev.err)
			}
			st.got = append(st.got, ev.env)
		case <-timeout:
			t.Fatalf("stream not closed within 60 s; got:\n%s", strings.Join(enginetest.Sequence(st.got), "\n"))
		}
	}
}
