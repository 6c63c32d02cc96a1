package redact

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// naiveCandidates is candidates by a substring search per trigger.
func naiveCandidates(s string) (mask uint64) {
	for _, triggers := range triggerTable {
		for _, t := range triggers {
			if strings.Contains(s, t.lit) {
				mask |= 1 << t.rule
			}
		}
	}
	return mask
}

// candidates (one pass, skipping bytes by the pair table) finds the
// triggers a substring search finds: at the start, in the middle, at the
// end, cut short, and in random text of trigger bytes.
func TestCandidatesFindEveryTrigger(t *testing.T) {
	var inputs []string
	for _, triggers := range triggerTable {
		for _, tr := range triggers {
			inputs = append(inputs, tr.lit, "x"+tr.lit, tr.lit+"x", "ab "+tr.lit+" cd", tr.lit[:len(tr.lit)-1], strings.ToLower(tr.lit))
		}
	}
	inputs = append(inputs, "", typicalEvent, secretEvent)
	alphabet := "sk-ant_Pghxw@:=/.ABSIeyJbB ostuc(ilvepr"
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		b := make([]byte, rng.IntN(24))
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		inputs = append(inputs, string(b))
	}
	for _, s := range inputs {
		if got, want := candidates(s), naiveCandidates(s); got != want {
			t.Fatalf("candidates(%q) = %b, want %b", s, got, want)
		}
	}
}

func BenchmarkCandidates(b *testing.B) {
	b.SetBytes(int64(len(typicalEvent)))
	for b.Loop() {
		candidates(typicalEvent)
	}
}
