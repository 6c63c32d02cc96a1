package sse_test

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/runstream/runstream/sse"
)

func ExampleWriter() {
	w := sse.NewWriter(os.Stdout)
	_ = w.WriteRetry(3 * time.Second)
	_ = w.WriteFrame(sse.Frame{ID: "42", Event: "node.output.delta", Data: []byte(`{"seq":42}`)})
	_ = w.WriteComment("heartbeat")
	// A synthesised terminal frame has no id.
	_ = w.WriteFrame(sse.Frame{Event: "run.failed", Data: []byte(`{"synthesised":true}`)})
	err := w.WriteFrame(sse.Frame{ID: "43", Data: []byte("two\nlines")})
	fmt.Println(err)
	// Output:
	// retry: 3000
	//
	// id: 42
	// event: node.output.delta
	// data: {"seq":42}
	//
	// : heartbeat
	// event: run.failed
	// data: {"synthesised":true}
	//
	// sse: data contains LF at byte 3
}

func ExampleReader() {
	stream := "retry: 3000\r\n\r\n" +
		"id: 42\r\nevent: node.output.delta\r\ndata: {\"seq\":42}\r\n\r\n" +
		": heartbeat\r\n" +
		"data: line one\r\ndata: line two\r\n\r\n" +
		"id: 43\r\ndata: cut off by the end of the stream\r\n"
	r := sse.NewReader(strings.NewReader(stream))
	r.Comments = true
	for {
		ev, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			fmt.Println(err)
			return
		}
		if ev.IsComment {
			fmt.Printf("comment %q\n", ev.Data)
			continue
		}
		fmt.Printf("id=%q hasID=%v type=%q data=%q retry=%v\n", ev.ID, ev.HasID, ev.Type(), ev.Data, ev.Retry)
	}
	fmt.Printf("resume with Last-Event-ID %q\n", r.LastEventID())
	// Output:
	// id="42" hasID=true type="node.output.delta" data="{\"seq\":42}" retry=3s
	// comment "heartbeat"
	// id="42" hasID=false type="message" data="line one\nline two" retry=3s
	// resume with Last-Event-ID "42"
}
