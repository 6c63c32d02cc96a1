package metrics_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/runstream/runstream"
	"github.com/runstream/runstream/httpapi"
	"github.com/runstream/runstream/live"
	"github.com/runstream/runstream/memory"
	"github.com/runstream/runstream/metrics"
	"github.com/runstream/runstream/workflowsvc"
)

// exercised returns a registry with every runstream family registered —
// the HTTP API's and every collector of Metrics — and every observer
// method called once, so that each family has a sample.
func exercised(t *testing.T) *prometheus.Registry {
	t.Helper()
	reg := prometheus.NewRegistry()
	m := metrics.New(reg, "sqlite")
	m.WatchHub(func() map[string]live.Census { return map[string]live.Census{"thread": {Streams: 1, Subscriptions: 2}} })
	m.WatchRuns(func(_ context.Context, statuses []string) (map[string]int, error) {
		counts := map[string]int{}
		for _, s := range statuses {
			counts[s] = 1
		}
		return counts, nil
	}, func() int { return 1 })
	m.WatchStore(func() (int, int) { return 1, 3 })
	m.WatchListener(func() bool { return true }, func() int64 { return 1 })
	fail := runstream.Errorf(runstream.CodeUnavailable, "down")
	m.CommitGroup(3)
	m.Notified("workflow")
	m.WorkflowOutcome("resume", nil)
	m.Append.Checked("thread", 1, nil)
	m.Append.Redacted("thread", "key", 1)
	m.Append.Appended("thread", "thread_append", 1, time.Millisecond, time.Millisecond, nil)
	m.Append.Looked(time.Millisecond, fail)
	m.Append.Idempotency("replayed")
	m.Append.RunEntered("running")
	m.Hub.Polled(true, time.Millisecond, nil)
	m.Hub.Woken("queued")
	m.Hub.Cut("buffer_full")
	m.Streams.Opened("thread")
	m.Streams.Wrote("thread", 1, 100)
	m.Streams.StoreRead("thread", time.Millisecond, nil)
	m.Streams.CatchUp("thread", "cut")
	m.Streams.Closed("thread", "write_timeout")
	m.Engine.Claimed("running")
	m.Engine.LeaseRenewed(nil)
	m.Engine.NodeAttempted("http", "failed", time.Millisecond)
	m.Engine.NodeRetried("http")

	api := httpapi.New(httpapi.Config{Registry: reg}, workflowsvc.New(memory.NewWorkflowStore(), nil, nil, workflowsvc.Config{}), nil)
	api.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/healthz", nil))
	return reg
}

// gathered returns the names of reg's families.
func gathered(t *testing.T, reg *prometheus.Registry) []string {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, mf := range mfs {
		names = append(names, mf.GetName())
	}
	return names
}

// dashboard is the part of a Grafana dashboard model the test reads.
type dashboard struct {
	Title         string `json:"title"`
	UID           string `json:"uid"`
	SchemaVersion int    `json:"schemaVersion"`
	Panels        []struct {
		ID      int    `json:"id"`
		Type    string `json:"type"`
		Title   string `json:"title"`
		GridPos *struct {
			H, W, X, Y int
		} `json:"gridPos"`
		Targets []struct {
			Expr  string `json:"expr"`
			RefID string `json:"refId"`
		} `json:"targets"`
	} `json:"panels"`
}

var (
	// promqlSkipped are the parts of an expression that hold no metric
	// name: label matchers, strings and range selectors.
	promqlSkipped = regexp.MustCompile(`\{[^}]*\}|"[^"]*"|\[[^\]]*\]`)
	promqlName    = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*`)
)

// metricNames returns the runstream metric names expr reads, as families:
// the series of a histogram (_bucket, _sum, _count) name their family.
func metricNames(expr string, families []string) []string {
	var names []string
	for _, name := range promqlName.FindAllString(promqlSkipped.ReplaceAllString(expr, " "), -1) {
		if !strings.HasPrefix(name, "runstream_") {
			continue
		}
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if base, ok := strings.CutSuffix(name, suffix); ok && slices.Contains(families, base) {
				name = base
			}
		}
		names = append(names, name)
	}
	return names
}

// TestDashboardNamesExportedMetrics loads docs/grafana/runstream.json as a
// Grafana dashboard model and checks that every panel's every query reads
// at least one runstream metric and only metrics the registry exports.
func TestDashboardNamesExportedMetrics(t *testing.T) {
	families := gathered(t, exercised(t))
	raw, err := os.ReadFile("../docs/grafana/runstream.json")
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("the dashboard is not valid JSON: %v", err)
	}
	if d.Title == "" || d.UID == "" || d.SchemaVersion == 0 || len(d.Panels) == 0 {
		t.Fatalf("not a dashboard model: title %q uid %q schemaVersion %d, %d panels", d.Title, d.UID, d.SchemaVersion, len(d.Panels))
	}
	used := map[string]bool{}
	for _, p := range d.Panels {
		if p.GridPos == nil || p.ID == 0 {
			t.Errorf("panel %q has no id or gridPos", p.Title)
		}
		if p.Type == "row" {
			continue
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, target := range p.Targets {
			names := metricNames(target.Expr, families)
			if len(names) == 0 || target.RefID == "" {
				t.Errorf("panel %q: query %q reads no runstream metric or has no refId", p.Title, target.Expr)
			}
			for _, name := range names {
				used[name] = true
				if !slices.Contains(families, name) {
					t.Errorf("panel %q: query %q reads %s, which the registry does not export", p.Title, target.Expr, name)
				}
			}
		}
	}
	for _, name := range families {
		if strings.HasPrefix(name, "runstream_") && !used[name] {
			t.Errorf("no panel shows %s", name)
		}
	}
}

// TestMetricNamesOfExpressions checks the parser the dashboard test relies
// on: names inside label matchers, strings and ranges are not metrics;
// histogram series name their family.
func TestMetricNamesOfExpressions(t *testing.T) {
	families := []string{"runstream_a_seconds"}
	got := metricNames(`histogram_quantile(0.9, sum by (le) (rate(runstream_a_seconds_bucket{x="runstream_nope"}[5m]))) / runstream_b_total`, families)
	if want := []string{"runstream_a_seconds", "runstream_b_total"}; !slices.Equal(got, want) {
		t.Errorf("names = %v, want %v", got, want)
	}
}

// TestErrorCodeLabelsAreBounded: an error code that is not the
// contract's (as a buggy caller might build from a request) is labelled
// INTERNAL, never as it came.
func TestErrorCodeLabelsAreBounded(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := metrics.New(reg, "memory")
	invented := &runstream.Error{Code: "FROM_THE_REQUEST_4f2a", Message: "x"}
	m.Append.Checked("thread", 1, invented)
	m.Append.Appended("thread", "thread_append", 0, 0, 0, errors.New("plain error"))
	m.WorkflowOutcome("resume", invented)
	m.WorkflowOutcome("op-from-request", nil)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, metric := range mf.GetMetric() {
			for _, l := range metric.GetLabel() {
				if strings.Contains(l.GetValue(), "FROM_THE_REQUEST") || strings.Contains(l.GetValue(), "op-from-request") {
					t.Errorf("%s has label %s=%q", mf.GetName(), l.GetName(), l.GetValue())
				}
			}
		}
	}
}

// A scrape reads the runs' counts once, every status in that one read.
func TestRunsCountedInOneReadPerScrape(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := metrics.New(reg, "sqlite")
	var calls int
	m.WatchRuns(func(_ context.Context, statuses []string) (map[string]int, error) {
		calls++
		counts := map[string]int{}
		for i, s := range statuses {
			counts[s] = i + 1
		}
		return counts, nil
	}, nil)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	if calls != 1 {
		t.Errorf("one scrape counted the runs %d times, want once", calls)
	}
	got := map[string]float64{}
	for _, f := range families {
		if f.GetName() != "runstream_workflow_runs" {
			continue
		}
		for _, s := range f.GetMetric() {
			got[s.GetLabel()[0].GetValue()] = s.GetGauge().GetValue()
		}
	}
	if len(got) != 4 || got["queued"] != 1 || got["cancelling"] != 4 {
		t.Errorf("runstream_workflow_runs = %v, want the four statuses with their counts", got)
	}
}
