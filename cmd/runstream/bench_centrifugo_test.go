package main

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestBenchCentrifugoFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--scenario", "latency"},
		{"--scenario", "thread-latency", "--runs", "2"},
		{"--scenario", "thread-latency", "--run-filter"},
		{"--scenario", "thread-latency", "--instances", "2"},
		{"--scenario", "thread-ingest", "--cpu-profile", "cpu.prof"},
		{"--scenario", "thread-ingest", "--trace", "exec.trace"},
		{"--scenario", "thread-ingest", "--store", "sqlite:x.db"},
	} {
		m := &Main{Getenv: func(string) string { return "" }}
		args = append(args, "--centrifugo", "/nonexistent/centrifugo")
		if err := m.bench(context.Background(), args, io.Discard, io.Discard); !errors.Is(err, errUsage) {
			t.Errorf("bench %v: %v, want a usage error (before any server starts)", args, err)
		}
	}
}

// fakeCentrifugo answers the requests of centrifugoThreads the way
// Centrifugo 6 does, checking their API key and connection tokens, and
// keeps what was published per channel.
type fakeCentrifugo struct {
	t    *testing.T
	keys centrifugoKeys
	mu   sync.Mutex
	pubs map[string][]json.RawMessage
}

func (f *fakeCentrifugo) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, "/api/") && r.Header.Get("X-API-Key") != f.keys.apiKey {
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return
	}
	switch r.URL.Path {
	case "/api/publish":
		var cmd struct {
			Channel string          `json:"channel"`
			Data    json.RawMessage `json:"data"`
		}
		if err := json.NewDecoder(r.Body).Decode(&cmd); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		f.publish(cmd.Channel, cmd.Data)
		io.WriteString(w, `{"result":{}}`)
	case "/api/batch":
		var batch struct {
			Commands []struct {
				Publish struct {
					Channel string          `json:"channel"`
					Data    json.RawMessage `json:"data"`
				} `json:"publish"`
			} `json:"commands"`
		}
		if err := json.NewDecoder(r.Body).Decode(&batch); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		replies := make([]string, len(batch.Commands))
		for i, c := range batch.Commands {
			f.publish(c.Publish.Channel, c.Publish.Data)
			replies[i] = `{"publish":{}}`
		}
		fmt.Fprintf(w, `{"replies":[%s]}`, strings.Join(replies, ","))
	case "/api/history":
		io.WriteString(w, `{"result":{"publications":[],"epoch":"ep1","offset":3}}`)
	case "/connection/uni_sse":
		f.stream(w, r)
	default:
		http.NotFound(w, r)
	}
}

func (f *fakeCentrifugo) publish(channel string, data json.RawMessage) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pubs[channel] = append(f.pubs[channel], data)
}

// stream answers a uni_sse connection: the connect reply, with the
// recovered publications when the request asked for them, then a ping.
func (f *fakeCentrifugo) stream(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Token string `json:"token"`
		Subs  map[string]struct {
			Recover bool   `json:"recover"`
			Epoch   string `json:"epoch"`
			Offset  int    `json:"offset"`
		} `json:"subs"`
	}
	if err := json.Unmarshal([]byte(r.URL.Query().Get("cf_connect")), &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	channel, err := f.verify(req.Token)
	if err != nil {
		f.t.Errorf("connection token: %v", err)
		http.Error(w, err.Error(), http.StatusUnauthorized)
		return
	}
	var recovered []string
	if sub, ok := req.Subs[channel]; ok && sub.Recover && sub.Epoch == "ep1" {
		f.mu.Lock()
		for i, p := range f.pubs[channel][sub.Offset:] {
			recovered = append(recovered, fmt.Sprintf(`{"data":%s,"offset":%d}`, p, sub.Offset+i+1))
		}
		f.mu.Unlock()
	}
	w.Header().Set("Content-Type", "text/event-stream")
	fmt.Fprintf(w, "\r\ndata: {\"connect\":{\"client\":\"c1\",\"subs\":{%q:{\"recovered\":true,\"publications\":[%s]}}}}\n\n", channel, strings.Join(recovered, ","))
	io.WriteString(w, "data: {}\n\n")
	w.(http.Flusher).Flush()
	<-r.Context().Done()
}

// verify checks an HS256 connection token and returns its one channel.
func (f *fakeCentrifugo) verify(token string) (string, error) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return "", fmt.Errorf("%d parts", len(parts))
	}
	mac := hmac.New(sha256.New, f.keys.secret)
	mac.Write([]byte(parts[0] + "." + parts[1]))
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil || !hmac.Equal(sig, mac.Sum(nil)) {
		return "", errors.New("bad signature")
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return "", err
	}
	var claims struct {
		Sub      string   `json:"sub"`
		Channels []string `json:"channels"`
	}
	if err := json.Unmarshal(payload, &claims); err != nil || claims.Sub == "" || len(claims.Channels) != 1 {
		return "", fmt.Errorf("claims %s", payload)
	}
	return claims.Channels[0], nil
}

func TestCentrifugoThreads(t *testing.T) {
	keys := centrifugoKeys{apiKey: "key", secret: []byte("secret")}
	fake := &fakeCentrifugo{t: t, keys: keys, pubs: map[string][]json.RawMessage{}}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	api := centrifugoThreads{url: srv.URL, keys: keys, epochs: new(sync.Map)}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	at := time.Unix(1700000000, 123)
	if err := api.post(ctx, "th", "r0", 1, 200, at); err != nil {
		t.Fatal(err)
	}
	if err := api.post(ctx, "th", "r0", 3, 200, at); err != nil {
		t.Fatal(err)
	}
	if got := len(fake.pubs["th"]); got != 4 {
		t.Fatalf("published %d events, want 4 (one publish, one batch of 3)", got)
	}
	if size := len(fake.pubs["th"][0]); size < 190 || size > 210 {
		t.Errorf("event data is %d bytes, want about 200", size)
	}
	if err := api.post(ctx, "th", "r1", 1, 200, at); !errors.Is(err, errCentrifugoRuns) {
		t.Errorf("post to a second run: %v, want errCentrifugoRuns", err)
	}

	// Cursor 0 recovers the channel from its start: four events, each
	// with the time it was stamped with.
	var stamps []time.Time
	n, last, err := api.follow(ctx, "th", "", 0, 4, func() {}, func(data []byte) {
		if ts, ok := chainTime(data); ok {
			stamps = append(stamps, ts)
		}
	})
	if err != nil || n != 4 || last != 4 {
		t.Fatalf("follow from 0: %d events up to offset %d, %v; want 4 up to 4", n, last, err)
	}
	for _, ts := range stamps {
		if !ts.Equal(at) {
			t.Errorf("event stamped %v, want %v", ts, at)
		}
	}
	if len(stamps) != 4 {
		t.Errorf("%d stamps, want 4", len(stamps))
	}

	// A resumed follower recovers what follows its offset, and no more:
	// from 2, the events at 3 and 4; from 4, nothing, so it waits until
	// its context ends.
	if n, last, err := api.follow(ctx, "th", "", 2, 2, func() {}, nil); err != nil || n != 2 || last != 4 {
		t.Errorf("follow from 2: %d events up to offset %d, %v; want 2 up to 4", n, last, err)
	}
	short, stop := context.WithTimeout(ctx, 200*time.Millisecond)
	defer stop()
	if n, _, err := api.follow(short, "th", "", 4, 1, func() {}, nil); err == nil || n != 0 {
		t.Errorf("follow from 4: %d events, %v; want none and the context's end", n, err)
	}
	// Lines longer than the reader's buffer are read whole.
	for range 500 {
		if err := api.post(ctx, "th", "r0", 1, 200, at); err != nil {
			t.Fatal(err)
		}
	}
	if n, _, err := api.follow(ctx, "th", "", 0, 504, func() {}, nil); err != nil || n != 504 {
		t.Errorf("follow a recovery of 504 events (one line over 64 KiB): %d, %v", n, err)
	}
}
