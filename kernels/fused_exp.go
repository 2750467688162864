package kernels

import "math"

// The attention kernels here reproduce the arithmetic of llama.cpp's CPU
// backend on an AVX-512 machine bit for bit, on every kernel set, because
// random-weight and small models amplify a single flipped rounding of an
// attention weight into visible log-probability differences:
//   - exp is ggml's vector expf (ggml_v_expf, AVX-512 flavour: a degree-5
//     polynomial after a Cody-Waite reduction, scaled by 2^n with one
//     rounding), not a correctly rounded one;
//   - the softmax sum adds 16-value chunks in float32 with the AVX-512
//     reduction tree, then accumulates those chunk sums in float64;
//   - f16 dot products (scores against an f16 K cache, weights against an
//     f16 V cache) run as llamafile's tinyBLAS does: 16 float32 lanes, lane
//     l taking the values at indexes l, l+16, ..., then the same tree.

// fma32 returns a*b+c rounded once to float32, as the FMA instructions do.
// a*b is exact in float64; the float64 sum is rounded a second time to
// float32, which can only go wrong when it lands exactly on a float32
// midpoint, so that case alone takes the slow path.
func fma32(a, b, c float32) float32 {
	p := float64(a) * float64(b)
	s := p + float64(c)
	u := math.Float64bits(s)
	if exp := (u >> 52) & 0x7ff; exp >= 1023-126 && exp < 1023+128 && u&0x1fffffff != 0x10000000 {
		return float32(s)
	}
	return fma32Slow(p, float64(c), s)
}

// FMA32 returns a*b+c rounded once to float32, as an FMA instruction does
// (Go has no float32 FMA), for code that must reproduce ggml's fused
// arithmetic exactly.
func FMA32(a, b, c float32) float32 { return fma32(a, b, c) }

// fma32Slow finishes fma32 for a float64 sum s = p+c (rounded) that may be
// a float32 midpoint or outside float32's normal range: when the rounding
// of s lost something, s moves one float64 step toward the exact sum.
func fma32Slow(p, c, s float64) float32 {
	if math.IsInf(s, 0) || math.IsNaN(s) {
		return float32(s)
	}
	bv := s - p
	err := (p - (s - bv)) + (c - bv) // exact: p + c = s + err
	r := float32(s)
	if err == 0 || float64(r) == s {
		return r
	}
	o := math.Nextafter32(r, float32(math.Copysign(math.Inf(1), s-float64(r))))
	if 2*s != float64(r)+float64(o) { // not a midpoint: the rounding is right
		return r
	}
	return float32(math.Nextafter(s, math.Copysign(math.Inf(1), err)))
}

// ggml_v_expf's constants: 1.5*2^23 (round to integer), log2(e), ln2 in a
// high and a low part, and the polynomial.
const (
	expShift = float32(0x1.8p23)
	expLog2e = float32(0x1.715476p+0)
	expLn2Hi = float32(0x1.62e4p-1)
	expLn2Lo = float32(0x1.7f7d1cp-20)
	expC1    = float32(0x1.ffffecp-1)
	expC2    = float32(0x1.fffdb6p-2)
	expC3    = float32(0x1.555e66p-3)
	expC4    = float32(0x1.573e2ep-5)
	expC5    = float32(0x1.0e4020p-7)
)

// ExpGGML returns ggml's vector expf of x, one lane of it: within 1.5 ulp
// of exp(x), 0 below about -104 and +Inf above about 88.4. Use it where
// results must match llama.cpp's softmax and SiLU exactly.
func ExpGGML(x float32) float32 {
	z := fma32(x, expLog2e, expShift)
	n := z - expShift
	b := fma32(-n, expLn2Lo, fma32(-n, expLn2Hi, x))
	u := b * b
	j := fma32(fma32(fma32(expC5, b, expC4), u, fma32(expC3, b, expC2)), u, fma32(expC1, b, 1))
	if n > 192 || n < -192 {
		if n <= 0 {
			return 0
		}
		return float32(math.Inf(1))
	}
	// vscalefps: j * 2^n rounded once (float64 holds it exactly).
	return float32(math.Ldexp(float64(j), int(n)))
}

// Sum16 adds 16 values in the order of _mm512_reduce_add_ps (see sum16),
// for code that must reproduce an AVX-512 reduction exactly.
func Sum16(v *[16]float32) float32 { return sum16(v) }

// sum16 adds 16 values as _mm512_reduce_add_ps does: halves of 8, then of
// 4, then pairs two apart, then the last two.
func sum16(v *[16]float32) float32 {
	var a [8]float32
	for i := range a {
		a[i] = v[i] + v[i+8]
	}
	b0, b1, b2, b3 := a[0]+a[4], a[1]+a[5], a[2]+a[6], a[3]+a[7]
	return (b0 + b2) + (b1 + b3)
}

// FastSoftmax replaces x with softmax(x) as ggml's soft_max does on an
// AVX-512 build: exp(x-max) by ExpGGML (vectorized where the CPU allows),
// each 16-value chunk from x[0] summed in float32 by the AVX-512 tree, the
// chunk sums accumulated in float64, and the float32 reciprocal applied.
// A llama.cpp attention row starts at KV cell 0 (masked cells give 0), so
// callers pass rows aligned that way to get identical sums. -Inf entries
// become 0.
func (s *Set) FastSoftmax(x []float32) { s.softmax(x, 0, false, true) }

// FastSoftmaxSink is FastSoftmax with an attention sink: one more logit,
// sink, that takes part in the maximum and the sum (its exp by libm's
// expf, added last in float64) but has no output, as ggml's soft_max
// does with sinks (gpt-oss).
func (s *Set) FastSoftmaxSink(x []float32, sink float32) { s.softmax(x, sink, true, true) }

// SoftmaxRow is ggml's soft_max of a row of exactly len(x) values on an
// AVX-512 build (a router's logits, a few expert weights): as FastSoftmax
// for the whole 16-value chunks, then the values past them one by one as
// ggml's scalar tail does: libm's expf, each added in float64.
func (s *Set) SoftmaxRow(x []float32) { s.softmax(x, 0, false, false) }

// softmax is the softmax of x in ggml's arithmetic; with hasSink, sink
// joins the maximum and the sum; padded: the values past the last whole
// 16-value chunk are summed as one chunk padded with zeros (a KV row's
// masked cells), else as ggml's scalar tail.
func (s *Set) softmax(x []float32, sink float32, hasSink, padded bool) {
	if len(x) == 0 {
		return
	}
	max := float32(math.Inf(-1))
	vmax, head := s.maxVec(x)
	if head > 0 {
		max = vmax
	}
	for _, v := range x[head:] {
		if v > max {
			max = v
		}
	}
	if hasSink && sink > max {
		max = sink
	}
	body := x
	if !padded {
		body = x[:len(x)&^15]
	}
	done := s.expSubVec(body, max)
	if padded && done < len(x) {
		// The last few values go through the vector kernel too, padded
		// with -Inf (whose exp is 0), where there is one.
		var buf [8]float32
		n := copy(buf[:], x[done:])
		for i := n; i < len(buf); i++ {
			buf[i] = float32(math.Inf(-1))
		}
		if s.expSubVec(buf[:], max) == len(buf) {
			copy(x[done:], buf[:n])
			done = len(x)
		}
	}
	for i := done; i < len(body); i++ {
		x[i] = ExpGGML(x[i] - max)
	}
	sum, head := s.chunkSumsVec(body)
	var chunk [16]float32
	for i := head; i < len(body); i += 16 {
		if i+16 <= len(body) {
			sum += float64(sum16((*[16]float32)(body[i : i+16])))
			continue
		}
		chunk = [16]float32{}
		copy(chunk[:], body[i:])
		sum += float64(sum16(&chunk))
	}
	for i := len(body); i < len(x); i++ {
		x[i] = float32(math.Exp(float64(x[i] - max)))
		sum += float64(x[i])
	}
	if hasSink {
		sum += float64(float32(math.Exp(float64(sink - max))))
	}
	s.Scale(x, float32(1/sum))
}

// FastSwiGLU sets dst = silu(gate) * up (dst may alias gate) as ggml's
// swiglu does on an AVX-512 build: x / (1 + ExpGGML(-x)) for every full
// 16 values, and with libm's expf (float64 exp rounded, which matches it
// but in rare cases) for the rest.
func (s *Set) FastSwiGLU(dst, gate, up []float32) {
	dst, up = dst[:len(gate)], up[:len(gate)]
	n16 := len(gate) &^ 15
	done := s.swigluVec(dst[:n16], gate[:n16], up[:n16])
	for i := done; i < n16; i++ {
		g := gate[i]
		dst[i] = g / (1 + ExpGGML(-g)) * up[i]
	}
	for i := n16; i < len(gate); i++ {
		g := gate[i]
		dst[i] = g / (1 + float32(math.Exp(float64(-g)))) * up[i]
	}
}

// AttnDotF16Rows sets y[i] to the dot product of x with
// rows[i*stride:i*stride+len(x)] as llamafile's tinyBLAS computes an f16
// matrix product on AVX-512 (16 float32 lanes, then the AVX-512 reduction
// tree; products of halves are exact in float32). Attention uses it for
// its scores against the K cache and its output against the transposed V
// cache; a tail of fewer than 16 values is padded with zeros, as ggml's
// masked cells are.
func (s *Set) AttnDotF16Rows(x, rows []uint16, stride int, y []float32) {
	n := len(x)
	if len(y) == 0 {
		return
	}
	if stride < n || (len(y)-1)*stride+n > len(rows) {
		panic("kernels: AttnDotF16Rows: rows do not fit")
	}
	done := s.attnDotF16Vec(x, rows, stride, y, 0)
	for i := done; i < len(y); i++ {
		y[i] = attnDotF16Generic(x, rows[i*stride:i*stride+n])
	}
}

// AttnDotF16RowsSingle is AttnDotF16Rows in the order of ggml_vec_dot_f16
// on AVX-512, which ggml uses instead of tinyBLAS for a batch of one token:
// four accumulators of 16 float32 lanes over 64-value steps, added pairwise
// ((0+2)+(1+3)) and then by the AVX-512 tree. With pad the vector counts as
// padded with zeros to a multiple of 64 (a row over the KV cells, which
// llama.cpp pads to 256); without it the values past the last multiple of
// 64 are added one by one in float64 after the tree, as ggml's scalar tail.
func (s *Set) AttnDotF16RowsSingle(x, rows []uint16, stride int, y []float32, pad bool) {
	n := len(x)
	if len(y) == 0 {
		return
	}
	if stride < n || (len(y)-1)*stride+n > len(rows) {
		panic("kernels: AttnDotF16RowsSingle: rows do not fit")
	}
	done := 0
	if pad || n%64 == 0 {
		done = s.attnDotF16Vec(x, rows, stride, y, 1)
	}
	for i := done; i < len(y); i++ {
		y[i] = attnDotF16SingleGeneric(x, rows[i*stride:i*stride+n], pad)
	}
}

func attnDotF16SingleGeneric(a, b []uint16, pad bool) float32 {
	b = b[:len(a)]
	tab := f16Table
	var acc [64]float32 // acc[16*j+l]: accumulator j, lane l
	n := len(a)
	end := n &^ 63
	if pad {
		end = n
	}
	for i := 0; i < end; i += 64 {
		k := min(64, end-i)
		for l := 0; l < k; l++ {
			acc[l] += tab[a[i+l]] * tab[b[i+l]]
		}
	}
	var v [16]float32
	for l := range v {
		v[l] = (acc[l] + acc[32+l]) + (acc[16+l] + acc[48+l])
	}
	if end == n {
		return sum16(&v)
	}
	s := float64(sum16(&v))
	for i := end; i < n; i++ {
		s += float64(tab[a[i]] * tab[b[i]])
	}
	return float32(s)
}

func attnDotF16Generic(a, b []uint16) float32 {
	b = b[:len(a)]
	tab := f16Table
	var acc [16]float32
	i := 0
	for ; i+16 <= len(a); i += 16 {
		for l := range acc {
			acc[l] += tab[a[i+l]] * tab[b[i+l]]
		}
	}
	for l := 0; i+l < len(a); l++ {
		acc[l] += tab[a[i+l]] * tab[b[i+l]]
	}
	return sum16(&acc)
}

// AttnDotF32Rows is AttnDotF16Rows for an F32 KV cache: y[i] = dot(x,
// rows[i*stride:][:len(x)]) as tinyBLAS sums an f32 product (16 float32
// lanes, each product fused into its lane, then the AVX-512 tree); a tail
// of fewer than 16 values counts as padded with zeros.
func (s *Set) AttnDotF32Rows(x, rows []float32, stride int, y []float32) {
	n := len(x)
	if len(y) == 0 {
		return
	}
	if stride < n || (len(y)-1)*stride+n > len(rows) {
		panic("kernels: AttnDotF32Rows: rows do not fit")
	}
	for i := s.attnDotF32Vec(x, rows, stride, y, 0); i < len(y); i++ {
		y[i] = attnDotF32Generic(x, rows[i*stride:i*stride+n])
	}
}

func attnDotF32Generic(a, b []float32) float32 {
	b = b[:len(a)]
	var acc [16]float32
	for i := 0; i < len(a); i += 16 {
		for l := 0; l < 16 && i+l < len(a); l++ {
			acc[l] = fma32(a[i+l], b[i+l], acc[l])
		}
	}
	return sum16(&acc)
}

// AttnDotF32RowsSingle is AttnDotF16RowsSingle for an F32 KV cache, in the
// order of ggml_vec_dot_f32 on AVX-512 (each product fused into its lane;
// without pad, the products past the last multiple of 64 are rounded and
// added one by one to the float32 total after the tree).
func (s *Set) AttnDotF32RowsSingle(x, rows []float32, stride int, y []float32, pad bool) {
	n := len(x)
	if len(y) == 0 {
		return
	}
	if stride < n || (len(y)-1)*stride+n > len(rows) {
		panic("kernels: AttnDotF32RowsSingle: rows do not fit")
	}
	done := 0
	if pad || n%64 == 0 {
		done = s.attnDotF32Vec(x, rows, stride, y, 1)
	}
	for i := done; i < len(y); i++ {
		y[i] = attnDotF32SingleGeneric(x, rows[i*stride:i*stride+n], pad)
	}
}

func attnDotF32SingleGeneric(a, b []float32, pad bool) float32 {
	b = b[:len(a)]
	var acc [64]float32
	n := len(a)
	end := n &^ 63
	if pad {
		end = n
	}
	for i := 0; i < end; i += 64 {
		for l := 0; l < 64 && i+l < end; l++ {
			acc[l] = fma32(a[i+l], b[i+l], acc[l])
		}
	}
	var v [16]float32
	for l := range v {
		v[l] = (acc[l] + acc[32+l]) + (acc[16+l] + acc[48+l])
	}
	s := sum16(&v)
	for i := end; i < n; i++ {
		s += float32(a[i] * b[i]) // ggml's scalar tail: not fused
	}
	return s
}
