package kernels

import (
	"math"
	"sync"
)

// RMSNorm sets dst = x / sqrt(mean(x²) + eps) * w, as ggml's rms_norm
// followed by mul: squares rounded to float32 and summed in float64, the
// scale computed in float32. w may be nil (no weight). dst may alias x.
func RMSNorm(dst, x, w []float32, eps float32) {
	n := len(x)
	if n == 0 {
		return
	}
	dst = dst[:n]
	var sum float64
	for _, v := range x {
		sum += float64(v * v)
	}
	mean := float32(sum / float64(n))
	scale := 1 / float32(math.Sqrt(float64(mean+eps)))
	if w == nil {
		for i, v := range x {
			dst[i] = v * scale
		}
		return
	}
	w = w[:n]
	for i, v := range x {
		dst[i] = float32(v*scale) * w[i]
	}
}

// Softmax replaces x with softmax(x), subtracting the maximum first; the sum
// is accumulated in float64 and its reciprocal applied as a float32 scale,
// as ggml's soft_max does. -Inf entries (masked) become 0.
func Softmax(x []float32) {
	if len(x) == 0 {
		return
	}
	max := float32(math.Inf(-1))
	for _, v := range x {
		if v > max {
			max = v
		}
	}
	var sum float64
	for i, v := range x {
		e := float32(math.Exp(float64(v - max)))
		x[i] = e
		sum += float64(e)
	}
	scale := float32(1 / sum)
	for i := range x {
		x[i] *= scale
	}
}

// SiLU sets dst[i] = x[i] / (1 + exp(-x[i])). dst may alias x.
func SiLU(dst, x []float32) {
	dst = dst[:len(x)]
	for i, v := range x {
		dst[i] = v / (1 + float32(math.Exp(float64(-v))))
	}
}

// SwiGLU sets dst[i] = silu(gate[i]) * up[i]; dst may alias gate or up.
func SwiGLU(dst, gate, up []float32) {
	dst, up = dst[:len(gate)], up[:len(gate)]
	for i, g := range gate {
		dst[i] = g / (1 + float32(math.Exp(float64(-g)))) * up[i]
	}
}

// GELU constants, as ggml spells them.
const (
	geluCoefA      = float32(0.044715)
	geluSqrt2OverP = float32(0.79788456080286535587989211986876)
)

// geluF32 is the tanh approximation in float32, in ggml's operation order.
func geluF32(x float32) float32 {
	inner := geluSqrt2OverP * x * (1 + geluCoefA*x*x)
	return 0.5 * x * (1 + float32(math.Tanh(float64(inner))))
}

// geluGGML is ggml_gelu_f32 as GCC compiles it for the CPU backend's f16
// table: 1 + a*x*x contracted into one fused multiply-add (its default
// -ffp-contract=fast). Unfused, the table entry of x = -1.9990234 (f16
// 0xbfff) comes out one f16 ulp off ggml's; fused, all 65536 entries equal
// the table of llama.cpp's libggml-cpu.
func geluGGML(x float32) float32 {
	inner := geluSqrt2OverP * x * FMA32(geluCoefA*x, x, 1)
	return 0.5 * x * (1 + float32(math.Tanh(float64(inner))))
}

var (
	geluOnce  sync.Once
	geluTable []float32 // indexed by the f16 bits of the input
)

// GELU sets dst = gelu(x) with the tanh approximation, matching ggml's CPU
// build (GGML_GELU_FP16): inputs <= -10 give 0, >= 10 pass through, and the
// rest are rounded to f16 and looked up in a table of f16-rounded results.
// dst may alias x. The table (256 KiB) is built on first use.
func GELU(dst, x []float32) {
	geluOnce.Do(func() {
		geluTable = make([]float32, 1<<16)
		for i := range geluTable {
			geluTable[i] = F16ToF32(F32ToF16(geluGGML(F16ToF32(uint16(i)))))
		}
	})
	dst = dst[:len(x)]
	for i, v := range x {
		switch {
		case v <= -10:
			dst[i] = 0
		case v >= 10:
			dst[i] = v
		default:
			dst[i] = geluTable[F32ToF16(v)]
		}
	}
}

// GELUExact computes the tanh-approximation GELU in float32 without the f16
// table. This is what ik_llama.cpp's x86 SIMD path computes (it evaluates
// 0.5*(1+tanh(a)) as e/(e+1), e = exp(2a), for every full vector), so it is
// the closer match for references made with it (the synth models); GELU is
// the match for llama.cpp b4748.
func GELUExact(dst, x []float32) {
	dst = dst[:len(x)]
	for i, v := range x {
		dst[i] = geluF32(v)
	}
}

// Add sets dst[i] = a[i] + b[i]; dst may alias either.
func Add(dst, a, b []float32) {
	dst, b = dst[:len(a)], b[:len(a)]
	for i, v := range a {
		dst[i] = v + b[i]
	}
}

// Mul sets dst[i] = a[i] * b[i]; dst may alias either.
func Mul(dst, a, b []float32) {
	dst, b = dst[:len(a)], b[:len(a)]
	for i, v := range a {
		dst[i] = v * b[i]
	}
}

// Scale multiplies x by s in place.
func (st *Set) Scale(x []float32, s float32) {
	for i := st.scaleVec(x, s); i < len(x); i++ {
		x[i] *= s
	}
}

// Dot returns the dot product of a and b (len(a) values); float32 products
// summed in float64, as ggml's scalar ggml_vec_dot_f32.
func (s *Set) Dot(a, b []float32) float32 {
	return s.dotF32(a, b)
}

func dotF32Generic(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float64
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += float64(a[i] * b[i])
		s1 += float64(a[i+1] * b[i+1])
		s2 += float64(a[i+2] * b[i+2])
		s3 += float64(a[i+3] * b[i+3])
	}
	for ; i < len(a); i++ {
		s0 += float64(a[i] * b[i])
	}
	return float32(s0 + s1 + s2 + s3)
}

// Axpy sets y[i] += a * x[i] (len(x) values).
func (s *Set) Axpy(y []float32, a float32, x []float32) {
	s.axpyF32(y, a, x)
}

func axpyGeneric(y []float32, a float32, x []float32) {
	y = y[:len(x)]
	for i, v := range x {
		y[i] += a * v
	}
}

// F16Encode converts src to IEEE halves in dst (F16C rounding), for an F16
// KV cache or an f16-rounded query.
func F16Encode(dst []uint16, src []float32) {
	dst = dst[:len(src)]
	for i, v := range src {
		dst[i] = F32ToF16(v)
	}
}

// F16Decode widens halves to float32.
func F16Decode(dst []float32, src []uint16) {
	dst = dst[:len(src)]
	tab := f16Table
	for i, h := range src {
		dst[i] = tab[h]
	}
}

// DotF16 returns the dot product of two f16 vectors (len(a) values), as
// ggml_vec_dot_f16 computes it: each product is exact in float32, the sum
// is accumulated in float64 (the SIMD sets use float32 lanes).
func (s *Set) DotF16(a, b []uint16) float32 {
	return s.dotF16(a, b)
}

func dotF16Generic(a, b []uint16) float32 {
	b = b[:len(a)]
	tab := f16Table
	var s0, s1, s2, s3 float64
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += float64(tab[a[i]] * tab[b[i]])
		s1 += float64(tab[a[i+1]] * tab[b[i+1]])
		s2 += float64(tab[a[i+2]] * tab[b[i+2]])
		s3 += float64(tab[a[i+3]] * tab[b[i+3]])
	}
	for ; i < len(a); i++ {
		s0 += float64(tab[a[i]] * tab[b[i]])
	}
	return float32(s0 + s1 + s2 + s3)
}

// AxpyF16 sets y[i] += a * x[i] for an f16 vector x (len(x) values), for
// accumulating attention-weighted f16 V rows.
func AxpyF16(y []float32, a float32, x []uint16) {
	y = y[:len(x)]
	tab := f16Table
	for i, h := range x {
		y[i] += a * tab[h]
	}
}

// RoPEParams describe a rotary embedding as ggml's rope op takes them.
type RoPEParams struct {
	NDims       int       // rotated dimensions per head (even, <= head dim)
	FreqBase    float32   // theta base, e.g. 10000
	FreqScale   float32   // linear position scaling (1 = none; 0 means 1)
	FreqFactors []float32 // optional per-pair divisors (len NDims/2), e.g. Llama 3 rope scaling
	AttnFactor  float32   // magnitude scale on cos/sin (1 = none; 0 means 1)
	// ExtFactor is YaRN's extrapolation mix (0 = none, 1 for YaRN): pairs
	// below CorrDims[0] keep their unscaled angle, pairs past CorrDims[1]
	// take the scaled one, with a linear ramp between, and the magnitude
	// is multiplied by 1 + 0.1 ln(1/FreqScale).
	ExtFactor float32
	CorrDims  [2]float32 // from RoPEYarnCorrDims
}

// RoPEYarnCorrDims are YaRN's correction dimensions for nDims rotated
// dimensions trained on nCtxOrig positions, as ggml_rope_yarn_corr_dims
// computes them in float32: the pairs whose wavelength turns betaFast and
// betaSlow times over the original context.
func RoPEYarnCorrDims(nDims, nCtxOrig int, base, betaFast, betaSlow float32) [2]float32 {
	dim := func(nRot float32) float32 {
		num := float32(nDims) * logf32(float32(nCtxOrig)/(nRot*2*float32(math.Pi)))
		return num / (2 * logf32(base))
	}
	start := float32(math.Floor(float64(dim(betaFast))))
	end := float32(math.Ceil(float64(dim(betaSlow))))
	return [2]float32{max(0, start), min(float32(nDims-1), end)}
}

// logf32 is logf: the natural logarithm rounded to float32.
func logf32(x float32) float32 { return float32(math.Log(float64(x))) }

// RoPECache fills cache[0:NDims] with interleaved cos, sin for position pos,
// computed as ggml_rope_cache_init does in float32: theta starts at pos and is
// multiplied by base^(-2/NDims) once per pair, so angles round as ggml's do,
// and their cosine and sine are glibc's cosf and sinf (SinCosF32), which
// differ from correctly rounded values in about 1% of angles.
// One cache serves every head (and Q and K) at that position.
func RoPECache(p RoPEParams, pos int, cache []float32) {
	thetaScale := float32(math.Pow(float64(p.FreqBase), float64(-2/float32(p.NDims))))
	freqScale := p.FreqScale
	if freqScale == 0 {
		freqScale = 1
	}
	mscale := p.AttnFactor
	if mscale == 0 {
		mscale = 1
	}
	if p.ExtFactor != 0 {
		mscale *= 1 + 0.1*logf32(1/freqScale)
	}
	theta := float32(pos)
	cache = cache[:p.NDims]
	for i0 := 0; i0 < p.NDims; i0 += 2 {
		extrap := theta
		if p.FreqFactors != nil {
			extrap = theta / p.FreqFactors[i0/2]
		}
		t := freqScale * extrap
		if p.ExtFactor != 0 {
			y := (float32(i0/2) - p.CorrDims[0]) / max(0.001, p.CorrDims[1]-p.CorrDims[0])
			mix := (1 - min(1, max(0, y))) * p.ExtFactor
			t = t*(1-mix) + extrap*mix
		}
		sin, cos := SinCosF32(t)
		cache[i0] = cos * mscale
		cache[i0+1] = sin * mscale
		theta *= thetaScale
	}
}

// RoPEApply rotates nHeads consecutive heads of headDim values in x in place
// with a cache from RoPECache (nDims = len(cache) rotated dims; the rest of
// each head is left alone). neox selects the NeoX layout (pairs i and
// i+nDims/2) over the normal one (pairs 2i, 2i+1). Each rotated value is
// x0*c - x1*s and x0*s + x1*c with the first product fused into the sum (one
// rounding), as GCC contracts ggml's rotation on FMA machines.
func (s *Set) RoPEApply(x []float32, headDim, nHeads int, cache []float32, neox bool) {
	nDims := len(cache)
	_ = x[headDim*nHeads-1]
	if nDims > headDim {
		panic("kernels: RoPEApply: more rotated dimensions than the head has")
	}
	if s.ropeVec(x, headDim, nHeads, cache, neox) {
		return
	}
	for h := range nHeads {
		v := x[h*headDim : h*headDim+nDims]
		if neox {
			half := nDims / 2
			for ic := 0; ic < half; ic++ {
				c, s := cache[2*ic], cache[2*ic+1]
				x0, x1 := v[ic], v[ic+half]
				v[ic] = fma32(x0, c, -float32(x1*s))
				v[ic+half] = fma32(x0, s, float32(x1*c))
			}
		} else {
			for i0 := 0; i0 < nDims; i0 += 2 {
				c, s := cache[i0], cache[i0+1]
				x0, x1 := v[i0], v[i0+1]
				v[i0] = fma32(x0, c, -float32(x1*s))
				v[i0+1] = fma32(x0, s, float32(x1*c))
			}
		}
	}
}

// maxRoPEDims bounds the stack cache of the convenience RoPE.
const maxRoPEDims = 1024

// RoPE rotates all headDim dims of nHeads heads at position pos with base
// freqBase (a convenience over RoPECache + RoPEApply that recomputes the
// angles; cache them when rotating Q and K at the same position).
func (s *Set) RoPE(x []float32, headDim, nHeads, pos int, freqBase float32, neox bool) {
	if headDim > maxRoPEDims {
		panic("kernels: RoPE: head dimension above 1024; use RoPECache")
	}
	var buf [maxRoPEDims]float32
	cache := buf[:headDim]
	RoPECache(RoPEParams{NDims: headDim, FreqBase: freqBase}, pos, cache)
	s.RoPEApply(x, headDim, nHeads, cache, neox)
}
