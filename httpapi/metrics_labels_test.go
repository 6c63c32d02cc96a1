package httpapi

import (
	"crypto/rand"
	"encoding/hex"
	"strings"
	"testing"
)

// TestMetricLabelsAreBounded sends an invented method and a random path:
// /metrics names neither, only "other" and "unmatched".
func TestMetricLabelsAreBounded(t *testing.T) {
	env := newThreadEnv(t)
	var b [8]byte
	rand.Read(b[:])
	path := "/zz-" + hex.EncodeToString(b[:])
	env.do(t, "BREWCOFFEE", path, "")
	env.do(t, "BREWCOFFEE", "/api/threads/t1/runs", "")
	env.do(t, "GET", path, "")
	metrics := env.get(t, "/metrics", "").Body.String()
	for _, bad := range []string{"BREWCOFFEE", path[1:]} {
		if strings.Contains(metrics, bad) {
			t.Errorf("/metrics holds %q", bad)
		}
	}
	for _, want := range []string{`method="other"`, `route="unmatched"`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics has no %s", want)
		}
	}
}
