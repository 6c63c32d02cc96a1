package web_test

import (
	"bytes"
	"io/fs"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/runstream/runstream/web"
)

// The bundled examples are the files of examples/workflows, byte for byte.
func TestExamplesMatchTheRepository(t *testing.T) {
	want, err := filepath.Glob("../examples/workflows/*.yaml")
	if err != nil || len(want) == 0 {
		t.Fatalf("no examples: %v", err)
	}
	for _, path := range want {
		src, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		got, err := fs.ReadFile(web.Files(), "examples/"+filepath.Base(path))
		if err != nil {
			t.Fatalf("%s is not bundled: %v (copy it to web/static/examples)", path, err)
		}
		if !bytes.Equal(got, src) {
			t.Errorf("web/static/examples/%s differs from %s: copy it again", filepath.Base(path), path)
		}
	}
	bundled, _ := fs.Glob(web.Files(), "examples/*.yaml")
	if len(bundled) != len(want) {
		t.Errorf("bundled %v, want the %d files of examples/workflows", bundled, len(want))
	}
}

func TestHandlerRoutes(t *testing.T) {
	h := web.Handler()
	for _, tc := range []struct {
		method, path string
		status       int
		ctype, body  string
	}{
		{"GET", "/", 200, "text/html", `<script type="module" src="/app.js">`},
		{"GET", "/runs/run_1", 200, "text/html", "<title>runstream</title>"},
		{"GET", "/threads/t1", 200, "text/html", "<title>runstream</title>"},
		{"GET", "/app.js", 200, "text/javascript", "import"},
		{"GET", "/style.css", 200, "text/css", "prefers-color-scheme"},
		{"GET", "/examples/long.yaml", 200, "text/plain", "name: long"},
		{"GET", "/missing.js", 404, "text/plain", ""},
		{"GET", "/nope", 404, "text/plain", ""},
		{"GET", "/runs/r1/more", 404, "text/plain", ""},
		{"GET", "/examples", 404, "text/plain", ""},
		{"GET", "/index.html", 200, "text/html", "<title>runstream</title>"},
		{"HEAD", "/workflows", 200, "text/html", ""},
		{"POST", "/", 405, "text/plain", ""},
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(tc.method, tc.path, nil))
		if rec.Code != tc.status || !strings.HasPrefix(rec.Header().Get("Content-Type"), tc.ctype) || !strings.Contains(rec.Body.String(), tc.body) {
			t.Errorf("%s %s = %d %q %.80q, want %d %q containing %q", tc.method, tc.path, rec.Code, rec.Header().Get("Content-Type"), rec.Body.String(), tc.status, tc.ctype, tc.body)
		}
		if tc.status == 200 && !strings.Contains(rec.Header().Get("Content-Security-Policy"), "default-src 'self'") {
			t.Errorf("%s %s: no same-origin Content-Security-Policy", tc.method, tc.path)
		}
	}
}

// The UI loads nothing from elsewhere: no third-party code, no CDN.
func TestNoThirdPartyCode(t *testing.T) {
	external := regexp.MustCompile(`(?i)(src|href)\s*=\s*["']?(https?:)?//|@import\s+url|import\s+[^;]*from\s+["']https?:`)
	err := fs.WalkDir(web.Files(), ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.HasPrefix(path, "examples/") {
			return err
		}
		b, err := fs.ReadFile(web.Files(), path)
		if err != nil {
			return err
		}
		if m := external.Find(b); m != nil {
			t.Errorf("%s loads something from another origin: %q", path, m)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
