package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// A Centrifugo baseline (--centrifugo PATH): the thread scenarios load a
// Centrifugo server instead of runstream, with the same load generator,
// the same events and the same measurements, so that both are measured
// in one run on one machine. The issue that set the thread path's
// targets compared them with Centrifugo 6.9 on its memory engine (not
// durable); "go install github.com/centrifugal/centrifugo/v6@v6.9.1"
// builds it.
//
// The mapping: a thread is a channel with a history as long as the
// scenario needs; a POST is a publish (/api/publish, or /api/batch for
// several events); a follower is a unidirectional SSE connection
// (/connection/uni_sse) subscribed to its channel by its connection
// token, which recovers the channel from its start for a replay. Runs
// have no counterpart, so --runs and --run-filter are runstream's only,
// as are --instances, --stalled-followers and --cpu-profile.

// centrifugoKeys are the API key and the HMAC secret of connection
// tokens of a Centrifugo bench server.
type centrifugoKeys struct {
	apiKey string
	secret []byte
}

// startCentrifugo starts the Centrifugo executable exe on a free
// loopback port with a configuration for the thread scenarios, and
// waits until it is healthy.
func startCentrifugo(ctx context.Context, exe string, stderr io.Writer) (*benchServer, error) {
	dir, err := os.MkdirTemp("", "runstream-bench-centrifugo-")
	if err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	keys := centrifugoKeys{apiKey: rand.Text(), secret: []byte(rand.Text())}
	// History long enough for a replay of a whole scenario.
	const history = 1_000_000
	config := map[string]any{
		"http_server": map[string]any{"address": "127.0.0.1", "port": port},
		"log":         map[string]any{"level": "error"},
		"http_api":    map[string]any{"key": keys.apiKey},
		"uni_sse":     map[string]any{"enabled": true},
		"health":      map[string]any{"enabled": true},
		"client": map[string]any{
			"token":                          map[string]any{"hmac_secret_key": string(keys.secret)},
			"allowed_origins":                []string{"*"},
			"recovery_max_publication_limit": history,
		},
		"channel": map[string]any{"without_namespace": map[string]any{
			"history_size": history, "history_ttl": "1h", "force_recovery": true,
		}},
	}
	data, err := json.Marshal(config)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	path := filepath.Join(dir, "config.json")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	cmd := exec.CommandContext(ctx, exe, "--config", path)
	cmd.Stdout, cmd.Stderr = stderr, stderr
	if err := cmd.Start(); err != nil {
		cancel()
		os.RemoveAll(dir)
		return nil, fmt.Errorf("start Centrifugo: %w", err)
	}
	stop := func() { cancel(); cmd.Wait(); os.RemoveAll(dir) }
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	if err := waitHealthy(ctx, base+"/health", 10*time.Second); err != nil {
		stop()
		return nil, fmt.Errorf("Centrifugo did not start: %w", err)
	}
	return &benchServer{url: base, cmd: cmd, stop: stop, threads: centrifugoThreads{url: base, keys: keys, epochs: new(sync.Map)}, peer: "Centrifugo"}, nil
}

// freePort returns a loopback TCP port that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// waitHealthy polls url until it answers 200 or within is over.
func waitHealthy(ctx context.Context, url string, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("GET %s: %s", url, resp.Status)
		}
		if time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// centrifugoThreads is the thread API of a Centrifugo server at url: a
// thread is a channel.
type centrifugoThreads struct {
	url    string
	keys   centrifugoKeys
	epochs *sync.Map // thread → its channel's epoch
}

var errCentrifugoRuns = errors.New("Centrifugo has no runs: one run per thread, no run filter")

// post publishes n events to the thread's channel: one publish, or a
// batch of n.
func (c centrifugoThreads) post(ctx context.Context, thread, run string, n, size int, at time.Time) error {
	if run != "r0" {
		return errCentrifugoRuns
	}
	data := benchEventData(size, at)
	var body bytes.Buffer
	path := "/api/publish"
	if n == 1 {
		fmt.Fprintf(&body, `{"channel":%q,"data":%s}`, thread, data)
	} else {
		path = "/api/batch"
		body.WriteString(`{"commands":[`)
		for i := range n {
			if i > 0 {
				body.WriteByte(',')
			}
			fmt.Fprintf(&body, `{"publish":{"channel":%q,"data":%s}}`, thread, data)
		}
		body.WriteString(`]}`)
	}
	var reply struct {
		Error   *struct{ Message string } `json:"error"`
		Replies []struct {
			Error *struct{ Message string } `json:"error"`
		} `json:"replies"`
	}
	if err := c.api(ctx, path, body.Bytes(), &reply); err != nil {
		return err
	}
	if reply.Error != nil {
		return fmt.Errorf("Centrifugo %s: %s", path, reply.Error.Message)
	}
	for _, r := range reply.Replies {
		if r.Error != nil {
			return fmt.Errorf("Centrifugo %s: %s", path, r.Error.Message)
		}
	}
	return nil
}

// api POSTs body to a path of Centrifugo's server API and decodes the
// reply into v.
func (c centrifugoThreads) api(ctx context.Context, path string, body []byte, v any) error {
	req, err := http.NewRequestWithContext(ctx, "POST", c.url+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-API-Key", c.keys.apiKey)
	resp, err := benchClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("Centrifugo %s: %s: %s", path, resp.Status, bytes.TrimSpace(msg))
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// follow opens a unidirectional SSE connection subscribed to the
// thread's channel and reads it until it has want events. The
// subscription recovers the channel after the cursor, a publication
// offset (0: from its first publication), as a resumed runstream stream
// continues after Last-Event-ID; each publication's offset must be
// greater than the one before.
func (c centrifugoThreads) follow(ctx context.Context, thread, run string, after int64, want int, ready func(), onFrame func(data []byte)) (frames, last int64, err error) {
	if run != "" {
		return 0, after, errCentrifugoRuns
	}
	epoch, err := c.epoch(ctx, thread)
	if err != nil {
		return 0, after, err
	}
	connect := map[string]any{
		"token": c.token(thread),
		"subs":  map[string]any{thread: map[string]any{"recover": true, "epoch": epoch, "offset": after}},
	}
	request, err := json.Marshal(connect)
	if err != nil {
		return 0, after, err
	}
	resp, err := openBenchStream(ctx, c.url+"/connection/uni_sse?cf_connect="+url.QueryEscape(string(request)), nil)
	if err != nil {
		return 0, after, err
	}
	defer resp.Body.Close()
	ready()
	// A message is one line; a connect reply that recovered a channel
	// holds all its publications. Each event's data holds one "chain",
	// and the publication's offset follows its data.
	br := bufio.NewReaderSize(resp.Body, 64<<10)
	last = after
	for frames < int64(want) {
		line, err := readLongLine(br)
		if err != nil {
			return frames, last, fmt.Errorf("Centrifugo stream ended after %d of %d events: %w", frames, want, err)
		}
		if !bytes.HasPrefix(line, []byte("data: ")) {
			continue
		}
		if bytes.Contains(line, []byte(`"disconnect"`)) {
			return frames, last, fmt.Errorf("Centrifugo disconnected the follower: %s", bytes.TrimSpace(line))
		}
		for rest := line; ; {
			i := bytes.Index(rest, []byte(`"chain":"`))
			if i < 0 {
				break
			}
			rest = rest[i:]
			offset, ok := nextOffset(rest)
			if !ok || offset <= last {
				return frames, last, fmt.Errorf("publication offset %d after %d: out of order, repeated or missing", offset, last)
			}
			last = offset
			frames++
			if onFrame != nil {
				onFrame(rest)
			}
			rest = rest[1:]
		}
	}
	return frames, last, nil
}

// nextOffset reads the first publication offset in data.
func nextOffset(data []byte) (int64, bool) {
	const key = `"offset":`
	i := bytes.Index(data, []byte(key))
	if i < 0 {
		return 0, false
	}
	digits := data[i+len(key):]
	n := 0
	for n < len(digits) && digits[n] >= '0' && digits[n] <= '9' {
		n++
	}
	offset, err := strconv.ParseInt(string(digits[:n]), 10, 64)
	return offset, err == nil
}

// epoch returns the epoch of a thread's channel, which a recovery
// names; the memory engine keeps one per channel for the server's life.
func (c centrifugoThreads) epoch(ctx context.Context, thread string) (string, error) {
	if e, ok := c.epochs.Load(thread); ok {
		return e.(string), nil
	}
	var history struct {
		Result struct {
			Epoch string `json:"epoch"`
		} `json:"result"`
	}
	body := fmt.Appendf(nil, `{"channel":%q,"limit":0}`, thread)
	if err := c.api(ctx, "/api/history", body, &history); err != nil {
		return "", err
	}
	c.epochs.Store(thread, history.Result.Epoch)
	return history.Result.Epoch, nil
}

// readLongLine reads one line of any length: ReadSlice's when it fits
// the reader's buffer, else a copy.
func readLongLine(br *bufio.Reader) ([]byte, error) {
	line, err := br.ReadSlice('\n')
	if !errors.Is(err, bufio.ErrBufferFull) {
		return line, err
	}
	long := append([]byte(nil), line...)
	for errors.Is(err, bufio.ErrBufferFull) {
		line, err = br.ReadSlice('\n')
		long = append(long, line...)
	}
	return long, err
}

// token returns a connection token (HS256 JWT) that subscribes its
// connection to the channel of thread.
func (c centrifugoThreads) token(thread string) string {
	enc := base64.RawURLEncoding
	claims, _ := json.Marshal(map[string]any{"sub": "bench", "channels": []string{thread}})
	unsigned := enc.EncodeToString([]byte(`{"alg":"HS256","typ":"JWT"}`)) + "." + enc.EncodeToString(claims)
	mac := hmac.New(sha256.New, c.keys.secret)
	mac.Write([]byte(unsigned))
	return unsigned + "." + enc.EncodeToString(mac.Sum(nil))
}

// benchEventData renders the data of a Centrifugo event: the time at,
// padded to about size bytes, in the shape chainTime reads.
func benchEventData(size int, at time.Time) string {
	ns := strconv.FormatInt(at.UnixNano(), 10)
	return `{"chain":"` + ns + " " + benchPad(size, ns) + `","caller":"bench"}`
}

// benchPad returns the padding that brings an event whose content and
// metadata are {"chain":"ns "} and {"caller":"bench"} to about size
// bytes.
func benchPad(size int, ns string) string {
	return strings.Repeat("x", max(size-len(`{"chain":" "}{"caller":"bench"}`)-len(ns), 0))
}

// checkCentrifugoConfig refuses the options a Centrifugo baseline cannot
// take.
func checkCentrifugoConfig(cfg benchConfig) error {
	switch {
	case !strings.HasPrefix(cfg.scenario, "thread-"):
		return fmt.Errorf("%w: --centrifugo takes a thread scenario", errUsage)
	case cfg.runs > 1 || cfg.runFilter:
		return fmt.Errorf("%w: --centrifugo: %v", errUsage, errCentrifugoRuns)
	case cfg.instances > 1 || cfg.stalled > 0 || cfg.cpuProfile != "" || cfg.trace != "" || cfg.serverExe != "" || cfg.store != "":
		return fmt.Errorf("%w: --centrifugo takes none of --instances, --stalled-followers, --cpu-profile, --trace, --server-exe and --store", errUsage)
	}
	return nil
}
