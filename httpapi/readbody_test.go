package httpapi

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// readBody returns the body whole whether or not the request states its
// length, and keeps the limit of the reader it is given.
func TestReadBody(t *testing.T) {
	t.Parallel()
	body := strings.Repeat(`{"a":1}`, 1000)
	for _, tc := range []struct {
		name   string
		length int64
	}{
		{"stated", int64(len(body))},
		{"unknown", -1},
		{"beyond the preallocation", maxPreallocate + 1},
	} {
		r := httptest.NewRequest("POST", "/", strings.NewReader(body))
		r.ContentLength = tc.length
		got, err := readBody(r)
		if err != nil || !bytes.Equal(got, []byte(body)) {
			t.Errorf("%s: read %d bytes (%v), want the %d of the body", tc.name, len(got), err, len(body))
		}
	}

	w := httptest.NewRecorder()
	r := httptest.NewRequest("POST", "/", strings.NewReader(body))
	r.Body = http.MaxBytesReader(w, r.Body, 100)
	if _, err := readBody(r); !errors.As(err, new(*http.MaxBytesError)) {
		t.Errorf("a body past the limit: %v, want *http.MaxBytesError", err)
	}
	r = httptest.NewRequest("POST", "/", io.NopCloser(strings.NewReader(body)))
	r.ContentLength = int64(len(body))
	r.Body = http.MaxBytesReader(w, r.Body, 100)
	if _, err := readBody(r); !errors.As(err, new(*http.MaxBytesError)) {
		t.Errorf("a stated body past the limit: %v, want *http.MaxBytesError", err)
	}
}

// A stated length is read in one allocation; io.ReadAll would double its
// way up to the body's size. Not parallel: AllocsPerRun counts the whole
// process's allocations.
func TestReadBodyAllocatesOnce(t *testing.T) {
	body := strings.Repeat(`{"a":1}`, 1000)
	allocs := testing.AllocsPerRun(20, func() {
		r := httptest.NewRequest("POST", "/", strings.NewReader(body))
		r.ContentLength = int64(len(body))
		if _, err := readBody(r); err != nil {
			t.Fatal(err)
		}
	})
	base := testing.AllocsPerRun(20, func() {
		httptest.NewRequest("POST", "/", strings.NewReader(body))
	})
	// One for the buffer; the race detector's instrumentation may add one.
	// io.ReadAll takes 10 here.
	if extra := allocs - base; extra > 2 {
		t.Errorf("reading a stated body of %d bytes took %v allocations, want 1 (2 with -race)", len(body), extra)
	}
}
