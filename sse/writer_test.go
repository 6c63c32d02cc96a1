package sse

import (
	"bytes"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// TestWriterGolden pins the wire form of each kind of frame, and checks
// that the Reader reads each golden file back as intended.
func TestWriterGolden(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		write func(w *Writer) error
		want  []Event // read back with Comments set
	}{
		{
			name: "frame",
			write: func(w *Writer) error {
				return w.WriteFrame(Frame{ID: "42", Event: "node.output.delta", Data: []byte(`{"seq":42,"data":{"delta":"Hi"}}`)})
			},
			want: []Event{{ID: "42", HasID: true, Event: "node.output.delta", Data: `{"seq":42,"data":{"delta":"Hi"}}`}},
		},
		{
			name: "no_id",
			write: func(w *Writer) error {
				return w.WriteFrame(Frame{Event: "run.failed", Data: []byte(`{"data":{"synthesised":true}}`)})
			},
			want: []Event{{Event: "run.failed", Data: `{"data":{"synthesised":true}}`}},
		},
		{
			name: "no_event",
			write: func(w *Writer) error {
				return w.WriteFrame(Frame{ID: "7", Data: []byte(`{"seq":7}`)})
			},
			want: []Event{{ID: "7", HasID: true, Data: `{"seq":7}`}},
		},
		{
			name:  "comment",
			write: func(w *Writer) error { return w.WriteComment("heartbeat") },
			want:  []Event{{IsComment: true, Data: "heartbeat"}},
		},
		{
			name:  "empty_comment",
			write: func(w *Writer) error { return w.WriteComment("") },
			want:  []Event{{IsComment: true}},
		},
		{
			name: "retry",
			write: func(w *Writer) error {
				if err := w.WriteRetry(3 * time.Second); err != nil {
					return err
				}
				return w.WriteFrame(Frame{ID: "1", Event: "run.created", Data: []byte(`{}`)})
			},
			want: []Event{{ID: "1", HasID: true, Event: "run.created", Data: `{}`, Retry: 3 * time.Second}},
		},
		{
			name: "unicode",
			write: func(w *Writer) error {
				return w.WriteFrame(Frame{ID: "é-1", Event: "node.output.delta", Data: []byte("{\"delta\":\"héllo 世界 \u2028\u2029 😀 \ufeff\"}")})
			},
			want: []Event{{ID: "é-1", HasID: true, Event: "node.output.delta", Data: "{\"delta\":\"héllo 世界 \u2028\u2029 😀 \ufeff\"}"}},
		},
		{
			name: "empty_data",
			write: func(w *Writer) error {
				return w.WriteFrame(Frame{ID: "3", Event: "run.queued", Data: []byte(`{}`)})
			},
			want: []Event{{ID: "3", HasID: true, Event: "run.queued", Data: `{}`}},
		},
		{
			name:  "zero_length_data",
			write: func(w *Writer) error { return w.WriteFrame(Frame{}) },
			want:  []Event{{}},
		},
		{
			name: "stream",
			write: func(w *Writer) error {
				return errors.Join(
					w.WriteRetry(3*time.Second),
					w.WriteFrame(Frame{ID: "1", Event: "run.started", Data: []byte(`{"seq":1}`)}),
					w.WriteComment("heartbeat"),
					w.WriteFrame(Frame{ID: "2", Event: "node.output.delta", Data: []byte(`{"seq":2}`)}),
					w.WriteFrame(Frame{Event: "run.completed", Data: []byte(`{"synthesised":true}`)}),
				)
			},
			want: []Event{
				{ID: "1", HasID: true, Event: "run.started", Data: `{"seq":1}`, Retry: 3 * time.Second},
				{IsComment: true, Data: "heartbeat"},
				{ID: "2", HasID: true, Event: "node.output.delta", Data: `{"seq":2}`, Retry: 3 * time.Second},
				{ID: "2", Event: "run.completed", Data: `{"synthesised":true}`, Retry: 3 * time.Second},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var buf bytes.Buffer
			if err := tt.write(NewWriter(&buf)); err != nil {
				t.Fatalf("write: %v", err)
			}
			path := filepath.Join("testdata", tt.name+".golden")
			if *update {
				if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			golden, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if !bytes.Equal(buf.Bytes(), golden) {
				t.Errorf("wire form differs from %s (run with -update if intended)\ngot:\n%q\nwant:\n%q", path, buf.Bytes(), golden)
			}
			r := NewReader(bytes.NewReader(golden))
			r.Comments = true
			if got := readAll(t, r); !slices.Equal(got, tt.want) {
				t.Errorf("golden file reads back as\n%+v\nwant\n%+v", got, tt.want)
			}
		})
	}
}

// TestWriterRefuses checks that every value that cannot be framed on one
// line is refused with a *FieldError and that nothing is written.
func TestWriterRefuses(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		write  func(w *Writer) error
		field  string
		offset int
	}{
		{"id LF", func(w *Writer) error { return w.WriteFrame(Frame{ID: "4\n2", Data: []byte("x")}) }, "id", 1},
		{"id CR", func(w *Writer) error { return w.WriteFrame(Frame{ID: "42\r", Data: []byte("x")}) }, "id", 2},
		{"id NUL", func(w *Writer) error { return w.WriteFrame(Frame{ID: "\x0042", Data: []byte("x")}) }, "id", 0},
		{"id invalid UTF-8", func(w *Writer) error { return w.WriteFrame(Frame{ID: "4\xff", Data: []byte("x")}) }, "id", 1},
		{"event LF", func(w *Writer) error { return w.WriteFrame(Frame{Event: "run.\nstarted", Data: []byte("x")}) }, "event", 4},
		{"event CR", func(w *Writer) error { return w.WriteFrame(Frame{Event: "\rrun", Data: []byte("x")}) }, "event", 0},
		{"event NUL", func(w *Writer) error { return w.WriteFrame(Frame{Event: "run\x00", Data: []byte("x")}) }, "event", 3},
		{"event invalid UTF-8", func(w *Writer) error { return w.WriteFrame(Frame{Event: "\xe2\x82", Data: []byte("x")}) }, "event", 0},
		{"data LF", func(w *Writer) error { return w.WriteFrame(Frame{ID: "1", Data: []byte("{}\n")}) }, "data", 2},
		{"data CR", func(w *Writer) error { return w.WriteFrame(Frame{ID: "1", Data: []byte("{\r}")}) }, "data", 1},
		{"data CRLF", func(w *Writer) error { return w.WriteFrame(Frame{ID: "1", Data: []byte("é\r\n")}) }, "data", 2},
		{"data invalid UTF-8", func(w *Writer) error { return w.WriteFrame(Frame{ID: "1", Data: []byte("ab\xed\xa0\x80")}) }, "data", 2},
		{"comment LF", func(w *Writer) error { return w.WriteComment("heart\nbeat") }, "comment", 5},
		{"comment CR", func(w *Writer) error { return w.WriteComment("heartbeat\r") }, "comment", 9},
		{"comment NUL", func(w *Writer) error { return w.WriteComment("\x00") }, "comment", 0},
		{"comment invalid UTF-8", func(w *Writer) error { return w.WriteComment("\xc0\xaf") }, "comment", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var buf bytes.Buffer
			err := tt.write(NewWriter(&buf))
			if !errors.Is(err, ErrInvalidField) {
				t.Fatalf("err = %v, want ErrInvalidField", err)
			}
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Field != tt.field || fe.Offset != tt.offset {
				t.Errorf("err = %#v, want field %q at offset %d", err, tt.field, tt.offset)
			}
			if buf.Len() != 0 {
				t.Errorf("wrote %q, want nothing", buf.Bytes())
			}
		})
	}
}

func TestWriterRefusesNegativeRetry(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	if err := NewWriter(&buf).WriteRetry(-time.Millisecond); err == nil {
		t.Error("WriteRetry(-1ms) succeeded")
	}
	if buf.Len() != 0 {
		t.Errorf("wrote %q, want nothing", buf.Bytes())
	}
}

func TestWriteRetryTruncatesToMilliseconds(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	if err := NewWriter(&buf).WriteRetry(1500*time.Microsecond + 999*time.Nanosecond); err != nil {
		t.Fatal(err)
	}
	if got, want := buf.String(), "retry: 1\n\n"; got != want {
		t.Errorf("wrote %q, want %q", got, want)
	}
}

// TestAppendFrameKeepsDst checks that frames batch into one buffer and that
// a refused frame leaves the batch as it was.
func TestAppendFrameKeepsDst(t *testing.T) {
	t.Parallel()
	batch, err := AppendFrame(nil, Frame{ID: "1", Event: "a", Data: []byte("1")})
	if err != nil {
		t.Fatal(err)
	}
	before := string(batch)
	batch, err = AppendFrame(batch, Frame{ID: "2", Event: "b", Data: []byte("2\n")})
	if !errors.Is(err, ErrInvalidField) {
		t.Fatalf("err = %v, want ErrInvalidField", err)
	}
	if string(batch) != before {
		t.Fatalf("refused frame changed dst to %q", batch)
	}
	batch, err = AppendComment(batch, "heartbeat")
	if err != nil {
		t.Fatal(err)
	}
	batch, err = AppendFrame(batch, Frame{ID: "3", Data: []byte("3")})
	if err != nil {
		t.Fatal(err)
	}
	want := "id: 1\nevent: a\ndata: 1\n\n: heartbeat\nid: 3\ndata: 3\n\n"
	if string(batch) != want {
		t.Errorf("batch = %q, want %q", batch, want)
	}
}

func TestAppendFrameDoesNotAllocate(t *testing.T) {
	f := Frame{ID: "123456", Event: "node.output.delta", Data: []byte(`{"schemaVersion":"1.0","runId":"run_01","seq":123456,"data":{"delta":"héllo"}}`)}
	dst := make([]byte, 0, 512)
	allocs := testing.AllocsPerRun(100, func() {
		var err error
		if dst, err = AppendFrame(dst[:0], f); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("AppendFrame allocated %v times per call with room in dst", allocs)
	}
}

type failingWriter struct{ err error }

func (w failingWriter) Write([]byte) (int, error) { return 0, w.err }

func TestWriterWrapsWriteErrors(t *testing.T) {
	t.Parallel()
	want := errors.New("connection reset")
	w := NewWriter(failingWriter{want})
	for name, err := range map[string]error{
		"frame":   w.WriteFrame(Frame{Data: []byte("x")}),
		"comment": w.WriteComment("heartbeat"),
		"retry":   w.WriteRetry(time.Second),
	} {
		if !errors.Is(err, want) || !strings.HasPrefix(err.Error(), "sse: write "+name+": ") {
			t.Errorf("%s: err = %v, want %q wrapped as \"sse: write %s: ...\"", name, err, want, name)
		}
	}
}

// TestWriterOneWritePerFrame checks each frame goes out in a single Write,
// so a frame is never split across TCP writes by the writer.
func TestWriterOneWritePerFrame(t *testing.T) {
	t.Parallel()
	var rec writeRecorder
	w := NewWriter(&rec)
	if err := w.WriteFrame(Frame{ID: "1", Event: "e", Data: []byte("d")}); err != nil {
		t.Fatal(err)
	}
	if err := w.WriteComment("heartbeat"); err != nil {
		t.Fatal(err)
	}
	want := []string{"id: 1\nevent: e\ndata: d\n\n", ": heartbeat\n"}
	if !slices.Equal(rec.writes, want) {
		t.Errorf("writes = %q, want %q", rec.writes, want)
	}
}

type writeRecorder struct{ writes []string }

func (w *writeRecorder) Write(p []byte) (int, error) {
	w.writes = append(w.writes, string(p))
	return len(p), nil
}

// readAll reads events until io.EOF, failing the test on any other error.
func readAll(t testing.TB, r *Reader) []Event {
	t.Helper()
	var got []Event
	for {
		ev, err := r.Next()
		if err == io.EOF {
			return got
		}
		if err != nil {
			t.Fatalf("Next: %v", err)
		}
		got = append(got, ev)
	}
}

func BenchmarkAppendFrame(b *testing.B) {
	f := Frame{ID: "123456", Event: "node.output.delta", Data: []byte(`{"schemaVersion":"1.0","runId":"run_01","workflowId":"wf_01","versionId":"wv_03","seq":123456,"event":"node.output.delta","nodeId":"agent_writer","nodeRunId":"nr_09","timestamp":"2026-08-26T10:00:00+08:00","data":{"channel":"text","delta":"héllo wörld"}}`)}
	dst := make([]byte, 0, 4096)
	b.ReportAllocs()
	b.SetBytes(int64(len(f.Data)))
	for b.Loop() {
		var err error
		dst, err = AppendFrame(dst[:0], f)
		if err != nil {
			b.Fatal(err)
		}
	}
}

func TestAppendSeqFrameMatchesAppendFrame(t *testing.T) {
	t.Parallel()
	data := func(s string) func([]byte) ([]byte, error) {
		return func(b []byte) ([]byte, error) { return append(b, s...), nil }
	}
	for _, tc := range []struct {
		seq   int64
		event string
		data  string
	}{{1, "run.created", `{"a":1}`}, {42, "", `{}`}, {9000000000, "node.progress", `"é"`}} {
		got, err := AppendSeqFrame([]byte("keep"), tc.seq, tc.event, data(tc.data))
		if err != nil {
			t.Fatal(err)
		}
		want, _ := AppendFrame([]byte("keep"), Frame{ID: strconv.FormatInt(tc.seq, 10), Event: tc.event, Data: []byte(tc.data)})
		if string(got) != string(want) {
			t.Errorf("AppendSeqFrame = %q, want %q", got, want)
		}
	}
	for name, tc := range map[string]struct {
		event string
		data  func([]byte) ([]byte, error)
	}{
		"line break in the data":  {"e", data("{\n}")},
		"invalid UTF-8 data":      {"e", data("\xff")},
		"line break in the event": {"a\nb", data("{}")},
		"failing data":            {"e", func(b []byte) ([]byte, error) { return append(b, "half"...), errors.New("boom") }},
	} {
		out, err := AppendSeqFrame([]byte("keep"), 1, tc.event, tc.data)
		if err == nil || string(out) != "keep" {
			t.Errorf("%s: %q, %v; want the buffer unchanged and an error", name, out, err)
		}
	}
}
