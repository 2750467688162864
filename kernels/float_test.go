package kernels

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRMSNorm(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	x := randomFloats(rng, 333, 3)
	w := randomFloats(rng, 333, 1)
	const eps = 1e-5
	var ss float64
	for _, v := range x {
		ss += float64(v) * float64(v)
	}
	inv := 1 / math.Sqrt(ss/333+eps)
	got := make([]float32, len(x))
	RMSNorm(got, x, w, eps)
	for i := range x {
		assert.InDelta(t, float64(x[i])*inv*float64(w[i]), got[i], 1e-6*math.Abs(float64(x[i])*inv*float64(w[i]))+1e-7)
	}
	// In place, no weight.
	y := append([]float32(nil), x...)
	RMSNorm(y, y, nil, eps)
	for i := range x {
		assert.InDelta(t, float64(x[i])*inv, y[i], 1e-6*math.Abs(float64(x[i])*inv)+1e-7)
	}
}

func TestSoftmax(t *testing.T) {
	x := []float32{1, 2, 3, float32(math.Inf(-1)), 1000, 999}
	Softmax(x)
	e := []float64{math.Exp(1 - 1000), math.Exp(2 - 1000), math.Exp(3 - 1000), 0, 1, math.Exp(-1)}
	var s float64
	for _, v := range e {
		s += v
	}
	for i := range x {
		assert.InDelta(t, e[i]/s, x[i], 1e-7, "%d", i)
	}
	assert.Equal(t, float32(0), x[3])
}

func TestSiLUAndSwiGLU(t *testing.T) {
	x := []float32{-20, -1, 0, 0.5, 3, 30}
	g := make([]float32, len(x))
	SiLU(g, x)
	up := []float32{1, 2, 3, 4, 5, 6}
	sw := make([]float32, len(x))
	SwiGLU(sw, x, up)
	for i, v := range x {
		want := float64(v) / (1 + math.Exp(-float64(v)))
		assert.InDelta(t, want, g[i], 1e-6*math.Abs(want)+1e-12)
		assert.InDelta(t, want*float64(up[i]), sw[i], 1e-6*math.Abs(want*float64(up[i]))+1e-12)
	}
}

func TestGELU(t *testing.T) {
	x := []float32{-12, -10, -3, -1, -0.1, 0, 0.1, 0.7, 1, 2.5, 9.99, 10, 50}
	got := make([]float32, len(x))
	GELU(got, x)
	exact := make([]float32, len(x))
	GELUExact(exact, x)
	for i, v := range x {
		xv := float64(v)
		want := 0.5 * xv * (1 + math.Tanh(math.Sqrt(2/math.Pi)*xv*(1+0.044715*xv*xv)))
		assert.InDelta(t, want, exact[i], 1e-6*math.Abs(want)+1e-7, "exact %v", v)
		switch {
		case v <= -10:
			assert.Equal(t, float32(0), got[i])
		case v >= 10:
			assert.Equal(t, v, got[i])
		default:
			// Input and output are rounded to f16 (11 significant bits each).
			assert.InDelta(t, want, got[i], 2e-3*math.Abs(want)+1e-3*math.Abs(xv), "table %v", v)
			assert.Equal(t, got[i], F16ToF32(F32ToF16(got[i])), "result is an f16 value")
		}
	}
}

// TestGELUTableAsGGML checks the table entry that GCC's fused
// multiply-add in ggml_gelu_f32 moves: for x = f16 0xbfff (-1.9990234)
// llama.cpp's libggml-cpu table holds f16 0xa9d3 (read from its
// ggml_table_gelu_f16 after ggml_cpu_init); the unfused order gives the
// next f16 value. All 65536 entries were compared the same way and agree.
func TestGELUTableAsGGML(t *testing.T) {
	x := []float32{F16ToF32(0xbfff)}
	y := make([]float32, 1)
	GELU(y, x)
	assert.Equal(t, uint16(0xa9d3), F32ToF16(y[0]), "gelu(%v) = %v", x[0], y[0])
}

func TestElementwise(t *testing.T) {
	ks := Detect()
	a := []float32{1, 2, 3}
	b := []float32{4, 5, 6}
	d := make([]float32, 3)
	Add(d, a, b)
	assert.Equal(t, []float32{5, 7, 9}, d)
	Mul(d, a, b)
	assert.Equal(t, []float32{4, 10, 18}, d)
	ks.Scale(d, 0.5)
	assert.Equal(t, []float32{2, 5, 9}, d)
	assert.Equal(t, float32(32), ks.Dot(a, b))
	ks.Axpy(d, 2, a)
	assert.Equal(t, []float32{4, 9, 15}, d)
}

func TestDotF16(t *testing.T) {
	ks := Detect()
	rng := rand.New(rand.NewPCG(11, 12))
	for _, n := range []int{1, 7, 64, 255} {
		a := randomFloats(rng, n, 1)
		b := randomFloats(rng, n, 1)
		ah := make([]uint16, n)
		bh := make([]uint16, n)
		F16Encode(ah, a)
		F16Encode(bh, b)
		af := make([]float32, n)
		F16Decode(af, ah)
		var want, scale float64
		for i := range n {
			p := float64(F16ToF32(ah[i])) * float64(F16ToF32(bh[i]))
			want += p
			scale += math.Abs(p)
			require.Equal(t, F16ToF32(ah[i]), af[i])
		}
		require.InDelta(t, want, ks.DotF16(ah, bh), 1e-6*scale)
		y := make([]float32, n)
		AxpyF16(y, 3, ah)
		for i := range n {
			require.Equal(t, 3*af[i], y[i])
		}
	}
}

// TestRoPE checks the rotation against float64 angles pos*base^(-2i/d),
// that it preserves each pair's norm, and the NeoX pairing.
func TestRoPE(t *testing.T) {
	ks := Detect()
	rng := rand.New(rand.NewPCG(13, 14))
	const headDim, nHeads, base = 64, 3, 10000.0
	for _, pos := range []int{0, 1, 17, 511} {
		for _, neox := range []bool{false, true} {
			x := randomFloats(rng, headDim*nHeads, 1)
			got := append([]float32(nil), x...)
			ks.RoPE(got, headDim, nHeads, pos, base, neox)
			for h := range nHeads {
				for i := range headDim / 2 {
					a, b := h*headDim+2*i, h*headDim+2*i+1
					if neox {
						a, b = h*headDim+i, h*headDim+i+headDim/2
					}
					theta := float64(pos) * math.Pow(base, -2*float64(i)/headDim)
					c, s := math.Cos(theta), math.Sin(theta)
					w0 := float64(x[a])*c - float64(x[b])*s
					w1 := float64(x[a])*s + float64(x[b])*c
					// float32 angles accumulate ~i ulps of pos*theta_i.
					tol := 1e-6 * (1 + float64(pos)) * float64(i+1)
					require.InDelta(t, w0, got[a], tol, "pos %d head %d pair %d neox %v", pos, h, i, neox)
					require.InDelta(t, w1, got[b], tol)
				}
			}
		}
	}
	// Partial rotation leaves the tail alone.
	x := randomFloats(rng, 16, 1)
	y := append([]float32(nil), x...)
	cache := make([]float32, 8)
	RoPECache(RoPEParams{NDims: 8, FreqBase: 10000}, 5, cache)
	ks.RoPEApply(y, 16, 1, cache, true)
	require.Equal(t, x[8:], y[8:])
	require.NotEqual(t, x[:8], y[:8])
}

func TestFloatHelpersDoNotAllocate(t *testing.T) {
	ks := Detect()
	rng := rand.New(rand.NewPCG(19, 20))
	x := randomFloats(rng, 256, 1)
	w := randomFloats(rng, 256, 1)
	y := make([]float32, 256)
	h := make([]uint16, 256)
	cache := make([]float32, 64)
	GELU(y, x) // builds the table once
	allocs := testing.AllocsPerRun(5, func() {
		RMSNorm(y, x, w, 1e-6)
		Softmax(y)
		SiLU(y, x)
		SwiGLU(y, x, w)
		GELU(y, x)
		GELUExact(y, x)
		Add(y, x, w)
		Mul(y, x, w)
		ks.Scale(y, 2)
		ks.Axpy(y, 0.5, x)
		_ = ks.Dot(x, w)
		F16Encode(h, x)
		F16Decode(y, h)
		_ = ks.DotF16(h, h)
		AxpyF16(y, 0.5, h)
		RoPECache(RoPEParams{NDims: 64, FreqBase: 10000}, 7, cache)
		ks.RoPEApply(y, 64, 4, cache, true)
		ks.RoPE(y, 64, 4, 9, 10000, false)
	})
	require.Zero(t, allocs)
}
