package kernels

import (
	"math"
	"testing"
)

// TestRoPEYarn: YaRN's correction dimensions for a 64-dimension head
// trained on 16K positions (base 1e6, betas 32 and 1) are pairs 10 to 19;
// below them a pair keeps its unscaled angle, above them it takes the
// scaled one, and the magnitude is AttnFactor times 1 + 0.1 ln(factor).
func TestRoPEYarn(t *testing.T) {
	corr := RoPEYarnCorrDims(64, 16384, 1e6, 32, 1)
	if corr != [2]float32{10, 19} {
		t.Fatalf("correction dims %v, want [10 19]", corr)
	}
	p := RoPEParams{NDims: 64, FreqBase: 1e6, FreqScale: 1.0 / 16, AttnFactor: 0.5, ExtFactor: 1, CorrDims: corr}
	plain := RoPEParams{NDims: 64, FreqBase: 1e6, FreqScale: 1}
	scaled := RoPEParams{NDims: 64, FreqBase: 1e6, FreqScale: 1.0 / 16}
	y, a, b := make([]float32, 64), make([]float32, 64), make([]float32, 64)
	RoPECache(p, 100, y)
	RoPECache(plain, 100, a)
	RoPECache(scaled, 100, b)
	m := float32(0.5) * (1 + float32(0.1*math.Log(16)))
	for i := 0; i < 64; i += 2 {
		var want []float32
		switch {
		case i/2 < 10:
			want = a
		case i/2 > 19:
			want = b
		default:
			continue
		}
		for k := i; k < i+2; k++ {
			if d := math.Abs(float64(y[k] - want[k]*m)); d > 1e-6 {
				t.Errorf("pair %d: %v, want %v", i/2, y[k], want[k]*m)
			}
		}
	}
}
