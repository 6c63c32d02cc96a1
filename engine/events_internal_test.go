package engine

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// wholeInputSummary is what nodeInputSummary must equal: the summary of
// the input and the outputs encoded whole.
func wholeInputSummary(input json.RawMessage, outputs map[string]json.RawMessage) json.RawMessage {
	if len(input) == 0 {
		input = json.RawMessage("null")
	}
	if outputs == nil {
		outputs = map[string]json.RawMessage{}
	}
	return Summary(mustJSON(struct {
		Input json.RawMessage            `json:"input"`
		Nodes map[string]json.RawMessage `json:"nodes"`
	}{input, outputs}))
}

// TestNodeInputSummaryEqualsTheWholeEncoding compares nodeInputSummary
// with the summary of the whole encoding, over inputs and outputs of many
// sizes, with characters the encoder escapes (HTML, non-ASCII, spaces it
// compacts) and node ids that sort apart from their insertion order.
func TestNodeInputSummaryEqualsTheWholeEncoding(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	value := func() json.RawMessage {
		switch rng.IntN(5) {
		case 0:
			return nil
		case 1:
			return json.RawMessage(fmt.Sprint(rng.IntN(1000)))
		case 2:
			return json.RawMessage(`{ "html": "<b>&amp;</b>", "n": [1, 2, 3] }`)
		default:
			s, _ := json.Marshal(strings.Repeat("é<x>", rng.IntN(400)))
			return s
		}
	}
	for i := range 500 {
		outputs := map[string]json.RawMessage{}
		for range rng.IntN(12) {
			outputs[fmt.Sprintf("n%d<%d>", rng.IntN(100), rng.IntN(3))] = value()
		}
		if rng.IntN(10) == 0 {
			outputs = nil
		}
		input := value()
		got, want := nodeInputSummary(input, outputs), wholeInputSummary(input, outputs)
		if string(got) != string(want) {
			t.Fatalf("case %d: nodeInputSummary =\n%s\nwant\n%s", i, got, want)
		}
	}
}

// BenchmarkNodeInputSummary: a node that needs 50 outputs of 10 KiB each.
func BenchmarkNodeInputSummary(b *testing.B) {
	outputs := map[string]json.RawMessage{}
	for i := range 50 {
		s, _ := json.Marshal(strings.Repeat("x", 10<<10))
		outputs[fmt.Sprintf("node%02d", i)] = s
	}
	input := json.RawMessage(`{"question":"why"}`)
	b.Run("bounded", func(b *testing.B) {
		for b.Loop() {
			nodeInputSummary(input, outputs)
		}
	})
	b.Run("whole", func(b *testing.B) {
		for b.Loop() {
			wholeInputSummary(input, outputs)
		}
	})
}
