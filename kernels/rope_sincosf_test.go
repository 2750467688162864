package kernels

import (
	"math"
	"math/big"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSinCosF32Glibc checks SinCosF32 bit for bit against glibc's sinf and
// cosf (rope_sincosf_data_test.go, made by rope_sincosf_gen.py): RoPE
// angles of three bases, random, tiny and huge arguments (both range
// reductions and the polynomial-only range).
func TestSinCosF32Glibc(t *testing.T) {
	bad := 0
	for _, e := range glibcSinCosF32 {
		x := math.Float32frombits(e[0])
		s, c := SinCosF32(x)
		if math.Float32bits(s) != e[1] || math.Float32bits(c) != e[2] {
			bad++
			if bad <= 10 {
				t.Errorf("SinCosF32(%v) = %v, %v; glibc %v, %v", x, s, c, math.Float32frombits(e[1]), math.Float32frombits(e[2]))
			}
		}
	}
	assert.Zero(t, bad, "of %d angles", len(glibcSinCosF32))
	s, c := SinCosF32(float32(math.Inf(1)))
	assert.True(t, math.IsNaN(float64(s)) && math.IsNaN(float64(c)))
}

// TestRoPEThetaScale checks that the theta scale RoPECache derives matches
// ggml's powf for common bases and head sizes (a different scale would
// shift every angle after the first pair).
func TestRoPEThetaScale(t *testing.T) {
	for _, e := range glibcThetaScale {
		cache := make([]float32, e.nDims)
		// At position 1 the second pair's angle is the scale itself.
		RoPECache(RoPEParams{NDims: e.nDims, FreqBase: e.base}, 1, cache)
		s, c := SinCosF32(math.Float32frombits(e.bits))
		assert.Equal(t, c, cache[2], "base %v dims %d", e.base, e.nDims)
		assert.Equal(t, s, cache[3], "base %v dims %d", e.base, e.nDims)
	}
}

// fma32Big is a*b+c rounded once to float32, by exact arithmetic.
func fma32Big(a, b, c float32) float32 {
	x := new(big.Float).SetPrec(200).SetFloat64(float64(a))
	x.Mul(x, new(big.Float).SetPrec(200).SetFloat64(float64(b)))
	x.Add(x, new(big.Float).SetPrec(200).SetFloat64(float64(c)))
	f, _ := x.Float32()
	return f
}

// TestFMA32 checks the emulated float32 FMA against exact arithmetic on
// random operands and on sums that land on float32 midpoints in float64
// (where rounding twice would go wrong).
func TestFMA32(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	check := func(a, b, c float32) {
		t.Helper()
		want := fma32Big(a, b, c)
		if got := fma32(a, b, c); math.Float32bits(got) != math.Float32bits(want) && !(got == 0 && want == 0) {
			t.Fatalf("fma32(%v, %v, %v) = %v, want %v", a, b, c, got, want)
		}
	}
	for range 200000 {
		a := float32(r.NormFloat64() * math.Exp2(float64(r.IntN(40)-20)))
		b := float32(r.NormFloat64() * math.Exp2(float64(r.IntN(40)-20)))
		c := float32(r.NormFloat64() * math.Exp2(float64(r.IntN(80)-40)))
		check(a, b, c)
	}
	// Midpoints: a*b is half an ulp of c's binade (2^-24) plus a part too
	// small for float64 to keep next to c, in about 1 case of 32; with c
	// odd (1+2^-23) rounding the float64 midpoint to even goes wrong.
	odd := float32(1 + 0x1p-23)
	for range 20000 {
		a := float32(1 + float64(1+r.IntN(1<<20))*0x1p-23)
		b := float32(0x1p-24) / a
		check(a, b, 1)
		check(a, b, odd)
		check(a, -b, -odd)
		check(a, -b, odd)
		check(a, b, float32(r.NormFloat64()))
	}
	// Subnormal results.
	for range 20000 {
		a := float32(r.NormFloat64() * 0x1p-70)
		b := float32(r.NormFloat64() * 0x1p-70)
		c := float32(r.NormFloat64() * 0x1p-135)
		check(a, b, c)
	}
}

// TestRoPEApplyFused checks the rotation against exact arithmetic on every
// kernel set: each output is one product fused with the other (rounded)
// product; head sizes and rotated widths cover the vector kernels and their
// fallbacks (partial rotation, widths not a multiple of 8).
func TestRoPEApplyFused(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	forSets(t, func(t *testing.T, ks *Set) {
		for _, sz := range [][2]int{{64, 64}, {128, 128}, {80, 32}, {12, 12}, {16, 8}, {24, 20}} {
			hd, nd := sz[0], sz[1]
			const nh = 3
			cache := make([]float32, nd)
			for _, neox := range []bool{false, true} {
				for pos := range 20 {
					RoPECache(RoPEParams{NDims: nd, FreqBase: 10000}, pos*37, cache)
					x := make([]float32, hd*nh)
					for i := range x {
						x[i] = float32(r.NormFloat64())
					}
					got := append([]float32(nil), x...)
					ks.RoPEApply(got, hd, nh, cache, neox)
					for h := range nh {
						for p := range nd / 2 {
							i0, i1 := h*hd+2*p, h*hd+2*p+1
							if neox {
								i0, i1 = h*hd+p, h*hd+p+nd/2
							}
							c, s := cache[2*p], cache[2*p+1]
							require.Equal(t, fma32Big(x[i0], c, -(x[i1]*s)), got[i0], "head %d/%d neox %v pos %d pair %d", hd, nd, neox, pos, p)
							require.Equal(t, fma32Big(x[i0], s, x[i1]*c), got[i1], "head %d/%d neox %v pos %d pair %d", hd, nd, neox, pos, p)
						}
						for i := h*hd + nd; i < (h+1)*hd; i++ {
							require.Equal(t, x[i], got[i], "unrotated value %d", i)
						}
					}
				}
			}
		}
	})
}
