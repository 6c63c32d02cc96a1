// Package web is runstream's browser UI: hand-written HTML, CSS and
// JavaScript modules embedded in the binary, with no build step and no
// third-party code. The UI uses only the public HTTP API and the browser's
// own EventSource, so its reconnects resume with Last-Event-ID.
//
// Handler serves the files of static/ and answers every other path (the
// UI's client-side routes, such as /runs/{id} and /threads/{id}) with
// index.html. The example workflows of examples/workflows are bundled as
// static/examples/*.yaml (a test keeps the copies equal).
package web

import (
	"embed"
	"io/fs"
	"net/http"
	"path"
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

// assetExt lists the extensions of asset paths: a missing one is 404
// rather than index.html, so a typo in a module path fails loudly.
var assetExt = map[string]bool{".js": true, ".css": true, ".yaml": true, ".json": true, ".svg": true, ".ico": true, ".png": true}

// Handler returns the UI's handler. It answers GET and HEAD only; the
// caller routes /api/ elsewhere.
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
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'; frame-ancestors 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "same-origin")
		h.Set("Cache-Control", "no-cache")
		name := strings.TrimPrefix(path.Clean("/"+r.URL.Path), "/")
		if name != "" && name != "index.html" {
			if st, err := fs.Stat(static, name); err == nil && !st.IsDir() {
				if strings.HasSuffix(name, ".js") {
					h.Set("Content-Type", "text/javascript; charset=utf-8")
				} else if strings.HasSuffix(name, ".yaml") {
					h.Set("Content-Type", "text/plain; charset=utf-8")
				}
				fileServer.ServeHTTP(w, r)
				return
			}
			if assetExt[path.Ext(name)] {
				http.NotFound(w, r)
				return
			}
		}
		h.Set("Content-Type", "text/html; charset=utf-8")
		if r.Method == http.MethodHead {
			return
		}
		w.Write(index)
	})
}
