package crashtest

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// privatePostgres is a PostgreSQL cluster of the test's own, which it may
// stop and start without disturbing anyone else's tests.
type privatePostgres struct {
	bin, data, port string
	asPostgres      bool // root runs the cluster as the postgres user
}

// startPrivatePostgres creates a cluster in a temporary directory with
// initdb and starts it on a free port. It skips when no PostgreSQL
// server binaries are installed.
func startPrivatePostgres(t *testing.T) *privatePostgres {
	t.Helper()
	bin := os.Getenv("RUNSTREAM_TEST_POSTGRES_BIN")
	if bin == "" {
		matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
		if len(matches) == 0 {
			t.Skip("no PostgreSQL server binaries (initdb) found: set RUNSTREAM_TEST_POSTGRES_BIN to their directory")
		}
		bin = filepath.Dir(matches[len(matches)-1])
	}
	root, err := os.MkdirTemp("", "runstream-pg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	p := &privatePostgres{bin: bin, data: filepath.Join(root, "data"), port: strings.TrimPrefix(freePort(t), "127.0.0.1:")}
	if os.Geteuid() == 0 {
		// initdb refuses to run as root.
		pg, err := user.Lookup("postgres")
		if err != nil {
			t.Skip("running as root without a postgres user: cannot run a private PostgreSQL")
		}
		p.asPostgres = true
		if err := os.Chmod(root, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Mkdir(p.data, 0o700); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command("chown", pg.Username, p.data).CombinedOutput(); err != nil {
			t.Fatalf("chown: %v %s", err, out)
		}
	}
	p.run(t, "initdb", "-D", p.data, "-U", "postgres", "-A", "trust", "--no-sync")
	p.start(t)
	t.Cleanup(func() { p.ctl(t, "stop", "-m", "immediate") })
	return p
}

func (p *privatePostgres) url() string {
	return "postgres://postgres@127.0.0.1:" + p.port + "/postgres?sslmode=disable"
}

func (p *privatePostgres) run(t *testing.T, tool string, args ...string) {
	t.Helper()
	cmd := exec.Command(filepath.Join(p.bin, tool), args...)
	if p.asPostgres {
		cmd = exec.Command("runuser", append([]string{"-u", "postgres", "--", filepath.Join(p.bin, tool)}, args...)...)
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", tool, err, out)
	}
}

func (p *privatePostgres) ctl(t *testing.T, action string, args ...string) {
	p.run(t, "pg_ctl", append([]string{action, "-D", p.data, "-w", "-t", "60"}, args...)...)
}

func (p *privatePostgres) start(t *testing.T) {
	p.ctl(t, "start", "-l", filepath.Join(p.data, "server.log"),
		"-o", "-p "+p.port+" -c listen_addresses=127.0.0.1 -c unix_socket_directories='' -c fsync=off")
}

// TestPostgresRestart: two instances on a private PostgreSQL, a producer
// and two followers on each; PostgreSQL is stopped mid-stream and started
// again. Appends during the outage are answered 503 with Retry-After and
// no connection detail; the producers retry with the same key and body;
// afterwards every batch is stored once, seqs are 1..N, every follower's
// transcript is complete and in order, and both instances' LISTEN
// connections are back.
func TestPostgresRestart(t *testing.T) {
	pg := startPrivatePostgres(t)
	dir := t.TempDir()
	flags := []string{"--store", pg.url(), "--postgres-schema", "runstream", "--workers", "0", "--max-streams-per-user", "-1"}
	a := startServer(t, dir, freePort(t), flags...)
	b := startServer(t, dir, freePort(t), flags...)
	instances := []*server{a, b}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var followers []*follower
	var fwg sync.WaitGroup
	for i := range 4 {
		f := &follower{url: instances[i%2].Base() + "/api/threads/t1/stream"}
		followers = append(followers, f)
		fwg.Go(func() { f.run(ctx) })
	}

	const batches = 60
	var (
		outage   atomic.Bool
		answered [2]atomic.Int64 // 503s received during the outage
		problems = make(chan string, 100)
		pwg      sync.WaitGroup
	)
	for p := range 2 {
		pwg.Go(func() {
			client := &http.Client{Timeout: 10 * time.Second}
			deadline := time.Now().Add(2 * time.Minute)
			for n := range batches {
				body := fmt.Sprintf(`{"events":[{"event_type":"run.start","content":{"chain":null,"p":%d,"n":%d},"metadata":{"caller":"lead_agent"}}]}`, p, n)
				for {
					if time.Now().After(deadline) {
						problems <- fmt.Sprintf("producer %d stuck at batch %d", p, n)
						return
					}
					req, _ := http.NewRequest("POST", instances[p].Base()+"/api/threads/t1/runs/r1/events", strings.NewReader(body))
					req.Header.Set("Content-Type", "application/json")
					req.Header.Set("Idempotency-Key", fmt.Sprintf("p%d-%d", p, n))
					resp, err := client.Do(req)
					if err != nil {
						time.Sleep(50 * time.Millisecond)
						continue
					}
					answer, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					if resp.StatusCode == http.StatusCreated {
						break
					}
					if resp.StatusCode != http.StatusServiceUnavailable {
						problems <- fmt.Sprintf("producer %d: %d %s", p, resp.StatusCode, answer)
						return
					}
					if outage.Load() {
						answered[p].Add(1)
					}
					if resp.Header.Get("Retry-After") == "" {
						problems <- fmt.Sprintf("producer %d: 503 without Retry-After: %s", p, answer)
					}
					for _, leak := range []string{pg.port, "127.0.0.1", "dial", "connection refused", "postgres://"} {
						if strings.Contains(string(answer), leak) {
							problems <- fmt.Sprintf("producer %d: the 503 shows connection detail %q: %s", p, leak, answer)
						}
					}
					time.Sleep(100 * time.Millisecond)
				}
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
	time.Sleep(500 * time.Millisecond) // mid-stream
	outage.Store(true)
	pg.ctl(t, "stop", "-m", "fast")
	time.Sleep(1500 * time.Millisecond)
	outage.Store(false)
	pg.start(t)
	pwg.Wait()
	close(problems)
	for p := range problems {
		t.Error(p)
	}
	if answered[0].Load()+answered[1].Load() == 0 {
		t.Error("no append was answered 503 during the outage: the restart did not happen mid-stream")
	}

	rows := threadRows(t, a.Base(), "t1")
	if len(rows) != 2*batches {
		t.Errorf("the thread holds %d rows; want %d (each batch once)", len(rows), 2*batches)
	}
	for i, row := range rows {
		if int64(row["seq"].(float64)) != int64(i+1) {
			t.Fatalf("row %d has seq %v; want 1..N", i, row["seq"])
		}
	}
	deadline := time.Now().Add(60 * time.Second)
	for _, f := range followers {
		for f.count() < len(rows) && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
	}
	cancel()
	fwg.Wait()
	for i, f := range followers {
		if err := f.check(rows); err != nil {
			t.Errorf("follower %d: %v", i, err)
		}
	}

	// Both instances listen again.
	conn, err := pgx.Connect(context.Background(), pg.url())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	deadline = time.Now().Add(30 * time.Second)
	for {
		var listening int
		if err := conn.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity WHERE query ILIKE 'LISTEN %'`).Scan(&listening); err != nil {
			t.Fatal(err)
		}
		if listening >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d LISTEN connections 30 s after the restart; want one per instance (2)", listening)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
