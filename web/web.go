// Package web is runstream's browser UI: hand-written HTML, CSS and
// JavaScript modules embedded in the binary, with no build step and no
// third-party code. The UI uses only the public HTTP API and the browser's
// own EventSource, so its reconnects resume with Last-Event-ID.
//
// Handler serves the files of static/ and answers the UI's client-side
// routes (/, /workflows, /runs/{id}, /threads/{id}…) with index.html;
// Serves tells a mux which paths those are. The example workflows of examples/workflows are bundled as
// static/examples/*.yaml (a test keeps the copies equal).
package web

import (
	"embed"
	"io/fs"
	"net/http"
	"regexp"
	"strings"
)

//go:embed static
var files embed.FS

// static is the root of the served files.
var static = func() fs.FS {
	sub, err := fs.Sub(files, "static")
	if err != nil {
		panic(err)
	}
	return sub
}()

// Files returns the UI's files (index.html, the modules, the examples).
func Files() fs.FS { return static }

// pageRoute matches the UI's client-side routes, each answered with
// index.html: the first page, the lists, and one workflow, run or thread.
var pageRoute = regexp.MustCompile(`^/(workflows|runs|threads)?$|^/(workflows|runs|threads)/[^/]+$`)

// Serves reports whether Handler answers a GET of urlPath with a page or
// a file rather than 404: a mux gives the UI those paths and keeps its
// own answer for the others.
func Serves(urlPath string) bool {
	if pageRoute.MatchString(urlPath) {
		return true
	}
	name := strings.TrimPrefix(urlPath, "/")
	if !fs.ValidPath(name) || name == "." {
		return false
	}
	st, err := fs.Stat(static, name)
	return err == nil && !st.IsDir()
}

// Handler returns the UI's handler: the files of static/, index.html for
// the client-side routes, 404 for other paths. It answers GET and HEAD
// only.
func Handler() http.Handler {
	fileServer := http.FileServerFS(static)
	index, err := fs.ReadFile(static, "index.html")
	if err != nil {
		panic(err)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		if !Serves(r.URL.Path) {
			http.NotFound(w, r)
			return
		}
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'; frame-ancestors 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "same-origin")
		h.Set("Cache-Control", "no-cache")
		if !pageRoute.MatchString(r.URL.Path) && r.URL.Path != "/index.html" {
			if strings.HasSuffix(r.URL.Path, ".js") {
				h.Set("Content-Type", "text/javascript; charset=utf-8")
			} else if strings.HasSuffix(r.URL.Path, ".yaml") {
				h.Set("Content-Type", "text/plain; charset=utf-8")
			}
			fileServer.ServeHTTP(w, r)
			return
		}
		h.Set("Content-Type", "text/html; charset=utf-8")
		if r.Method == http.MethodHead {
			return
		}
		w.Write(index)
	})
}
