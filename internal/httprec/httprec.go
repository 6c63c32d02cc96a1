// Package httprec wraps an http.ResponseWriter to remember the status and
// size of the response written through it, for access logs, metrics and
// trace spans.
package httprec

import "net/http"

// Writer remembers the status and size of a response. Unwrap lets
// http.ResponseController reach the writer underneath (flushes, deadlines,
// taking the connection over).
type Writer struct {
	http.ResponseWriter
	// Status is the status written, 0 until the handler writes one (a
	// Write without WriteHeader counts as 200).
	Status int
	// Bytes counts the body bytes written.
	Bytes int64
}

// WriteHeader records the first status and passes it on.
func (w *Writer) WriteHeader(code int) {
	if w.Status == 0 {
		w.Status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

// Write records an implicit 200 and the bytes written.
func (w *Writer) Write(b []byte) (int, error) {
	if w.Status == 0 {
		w.Status = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(b)
	w.Bytes += int64(n)
	return n, err
}

// Unwrap returns the writer underneath, for http.ResponseController.
func (w *Writer) Unwrap() http.ResponseWriter { return w.ResponseWriter }
