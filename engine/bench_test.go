package engine

import (
	"testing"
)

func benchModel(b *testing.B) *Model {
	m, err := Open(smolLM2Path(b), ModelParams{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { m.Close() })
	return m
}

// BenchmarkSmolLM2Decode measures one decode step at a short context.
func BenchmarkSmolLM2Decode(b *testing.B) {
	m := benchModel(b)
	s, err := m.NewSession(SessionParams{NCtx: 4096})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	logits := make([]float32, m.Info().VocabSize)
	prompt := make([]int32, 32)
	for i := range prompt {
		prompt[i] = int32(100 + i)
	}
	if err := s.Prefill(prompt, logits); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if s.Pos() >= s.NCtx() {
			_ = s.Rewind(32)
		}
		if err := s.Decode(int32(200+i%100), logits); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tok/s")
}

// BenchmarkSmolLM2Prefill measures a 128-token prompt.
func BenchmarkSmolLM2Prefill(b *testing.B) {
	m := benchModel(b)
	s, err := m.NewSession(SessionParams{NCtx: 512})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	logits := make([]float32, m.Info().VocabSize)
	prompt := make([]int32, 128)
	for i := range prompt {
		prompt[i] = int32(100 + i)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		_ = s.Rewind(0)
		if err := s.Prefill(prompt, logits); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*len(prompt))/b.Elapsed().Seconds(), "tok/s")
}
