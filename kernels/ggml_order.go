package kernels

import (
	"encoding/binary"

	"github.com/moonlm/moonlm/gguf"
)

// GGML-order layouts: weight products summed in exactly the float32 order of
// llama.cpp's x86 CPU backend, so that a model can reproduce llama.cpp's
// logits bit for bit (the engine's llama.cpp numerics mode). The bytes stay
// in the GGUF layout (Pack copies); only the order of the float operations
// differs from the fast kernels. The kernels are pure Go and one row at a
// time: correctness, not speed, is their point. Integer partial sums are
// exact in either code, so only the float32 steps (which integer sums are
// converted, which scale products are fused into which accumulator, and the
// final reduction) are mirrored.

// GGMLOrder names the llama.cpp code path a PackedExact layout follows.
type GGMLOrder int

const (
	// GGMLRepack is llama.cpp's default on x86 with AVX2: q4_K matrices
	// whose row count is a multiple of 8 are repacked to q4_K_8x8 and
	// multiplied by ggml_gemm_q4_K_8x8_q8_K (tokens in groups of 4) and
	// ggml_gemv_q4_K_8x8_q8_K (the batch's last n%4 tokens); every other
	// matrix as under GGMLVecDot.
	GGMLRepack GGMLOrder = iota
	// GGMLVecDot is llama.cpp without repacked layouts (use_extra_bufts
	// off): every matrix goes through its type's vec_dot (or tinyBLAS,
	// which sums q8_0 and q5_0 alike), except that q4_K and q6_K batches of
	// 8 tokens or more take ggml-cpu's tiled K-quant kernel.
	GGMLVecDot
)

// ggmlMaxTok is the token count of one Dot call of the ggml-order
// layouts: llama.cpp picks its q4_K/q6_K kernel by the size of the whole
// micro-batch (512 tokens by default), so a Dot call must see all of it.
// One-row layouts never take matMulPacked's partial-group tile, so its
// Rows*MaxTok bound does not apply to them.
const ggmlMaxTok = 512

// ggmlLayout makes a one-row, copy-packed layout of type t.
func ggmlLayout(name string, t gguf.Type, dot func(cols int, g, x []byte, xStride, nTok int, y []float32, yStride int)) PackedLayout {
	return PackedLayout{
		Name: name, Type: t, Rows: 1, MaxTok: ggmlMaxTok,
		GroupBytes: func(cols int) int { return cols / t.BlockSize() * t.BlockBytes() },
		Pack:       func(dst, src []byte, cols int) { copy(dst, src) },
		Dot:        dot, DotGeneric: dot,
	}
}

var (
	ggmlQ80VecDot = ggmlLayout("q8_0.ggml-vecdot.v1", gguf.Q8_0, ggmlDotQ80)
	ggmlMXFP4Dot  = ggmlLayout("mxfp4.ggml-vecdot.v1", gguf.MXFP4, ggmlDotMXFP4)
	ggmlQ41VecDot = ggmlLayout("q4_1.ggml-vecdot.v1", gguf.Q4_1, ggmlDotQ41)
	ggmlQ50VecDot = ggmlLayout("q5_0.ggml-vecdot.v1", gguf.Q5_0, ggmlDotQ50)
	ggmlQ4KVecDot = ggmlLayout("q4_K.ggml-vecdot-tiled.v1", gguf.Q4_K, ggmlDotQ4K)
	ggmlQ6KVecDot = ggmlLayout("q6_K.ggml-vecdot-tiled.v1", gguf.Q6_K, ggmlDotQ6K)
	ggmlQ4K8x8    = ggmlLayout("q4_K.ggml-8x8.v1", gguf.Q4_K, ggmlDotQ4K8x8)
)

// ggmlTree8 is the reduction of ggml's 8-lane AVX2 accumulator
// (hsum_float_8): the two halves added, then pairs, then the last two.
func ggmlTree8(a *[8]float32) float32 {
	return ((a[0] + a[4]) + (a[2] + a[6])) + ((a[1] + a[5]) + (a[3] + a[7]))
}

// ggmlDotQ80 follows ggml_vec_dot_q8_0_q8_0 (and tinyBLAS, which sums
// alike) on AVX2/AVX-512: 8 float32 lanes, lane l taking the exact integer
// sum of bytes 4l..4l+3 of each block times the float32 product of the two
// block scales, fused into the lane; then the 8-lane tree.
func ggmlDotQ80(cols int, g, x []byte, xStride, nTok int, y []float32, yStride int) {
	rowBytes := cols / 32 * 34
	w := g[:rowBytes]
	for t := range nTok {
		xt := x[t*xStride : t*xStride+rowBytes]
		var acc [8]float32
		for b := 0; b < rowBytes; b += 34 {
			d := f16At(w[b:]) * f16At(xt[b:])
			wq, xq := w[b+2:b+34], xt[b+2:b+34]
			for l := range acc {
				s := int32(int8(wq[4*l]))*int32(int8(xq[4*l])) +
					int32(int8(wq[4*l+1]))*int32(int8(xq[4*l+1])) +
					int32(int8(wq[4*l+2]))*int32(int8(xq[4*l+2])) +
					int32(int8(wq[4*l+3]))*int32(int8(xq[4*l+3]))
				acc[l] = FMA32(d, float32(s), acc[l])
			}
		}
		y[t*yStride] = ggmlTree8(&acc)
	}
}

// ggmlDotMXFP4 follows ggml_vec_dot_mxfp4_q8_0 on AVX2 (the order of
// llama.cpp's repacked mxfp4_8x8 products too): blocks in pairs, each
// block's 8 lanes (lane l: the exact integer sum of values 4l..4l+3)
// times the product of the Q8_0 scale and the halved E8M0 scale fused
// into one of two accumulators (even blocks, odd blocks), the two added
// and reduced by the 8-lane tree; an odd last block is added as ggml's
// scalar tail does, its scaled sum fused into the total.
func ggmlDotMXFP4(cols int, g, x []byte, xStride, nTok int, y []float32, yStride int) {
	nb := cols / 32
	w := g[:nb*bytesMXFP4]
	for t := range nTok {
		xt := x[t*xStride : t*xStride+nb*gguf.BytesQ8_0]
		var acc [2][8]float32
		ib := 0
		for ; ib+1 < nb; ib += 2 {
			for k := range acc {
				wb, xb := w[(ib+k)*bytesMXFP4:(ib+k+1)*bytesMXFP4], xt[(ib+k)*gguf.BytesQ8_0:(ib+k+1)*gguf.BytesQ8_0]
				d := f16At(xb) * e8m0Half(wb[0])
				lanes := mxfp4Lanes(wb, xb)
				for l := range acc[k] {
					acc[k][l] = FMA32(d, float32(lanes[l]), acc[k][l])
				}
			}
		}
		var sum [8]float32
		for l := range sum {
			sum[l] = acc[0][l] + acc[1][l]
		}
		total := ggmlTree8(&sum)
		for ; ib < nb; ib++ {
			wb, xb := w[ib*bytesMXFP4:(ib+1)*bytesMXFP4], xt[ib*gguf.BytesQ8_0:(ib+1)*gguf.BytesQ8_0]
			d := f16At(xb) * e8m0Half(wb[0])
			lanes := mxfp4Lanes(wb, xb)
			var s int32
			for _, v := range lanes {
				s += v
			}
			total = FMA32(d, float32(s), total)
		}
		y[t*yStride] = total
	}
}

// mxfp4Lanes is the integer dot product of MXFP4 block wb with Q8_0
// block xb, in ggml's 8 lanes: lane l sums values 4l..4l+3 (the low
// nibbles are values 0-15, the high ones 16-31).
func mxfp4Lanes(wb, xb []byte) [8]int32 {
	qs, q8 := wb[1:bytesMXFP4], xb[2:gguf.BytesQ8_0]
	var lanes [8]int32
	for i := range 32 {
		lanes[i/4] += int32(kvaluesMXFP4[nibbleAt(qs, i, 16)]) * int32(int8(q8[i]))
	}
	return lanes
}

// q8KBlock is one q8_K activation block: float32 scale, 256 quants, 16
// sums of 16 quants.
const q8KBlock = 292

// q4KScaleMin unpacks sub-block j's 6-bit scale and min of a q4_K block.
func q4KScaleMin(sc []byte, j int) (s, m int32) {
	if j < 4 {
		return int32(sc[j] & 63), int32(sc[j+4] & 63)
	}
	return int32(sc[j+4]&0xf | (sc[j-4]>>6)<<4), int32(sc[j+4]>>4 | (sc[j]>>6)<<4)
}

// q4KSubDot returns the integer dot product of q4_K sub-block j (32
// nibbles) with the matching 32 activation quants, split into the 8 ggml
// lanes (lane l: values 4l..4l+3), unscaled.
func q4KSubDot(wb []byte, q8 []byte, j int, lanes *[8]int32) {
	qs := wb[16+32*(j/2) : 16+32*(j/2)+32]
	a := q8[32*j : 32*j+32]
	shift := uint(4 * (j & 1))
	for l := range lanes {
		var s int32
		for e := 4 * l; e < 4*l+4; e++ {
			s += int32(qs[e]>>shift&0xf) * int32(int8(a[e]))
		}
		lanes[l] = s
	}
}

// q8KBSum32 is the sum of the 32 activation quants of sub-block j, from
// the block's 16-value sums.
func q8KBSum32(yb []byte, j int) int32 {
	return int32(int16(binary.LittleEndian.Uint16(yb[260+4*j:]))) + int32(int16(binary.LittleEndian.Uint16(yb[262+4*j:])))
}

// ggmlDotQ4KVecDot follows ggml_vec_dot_q4_K_q8_K (AVX2): per super-block
// an exact integer per lane l (values 4l..4l+3 of every 32, times their
// sub-block scales) fused into lane l with d(weight)*d(activation); the
// mins through 4 lanes of their own (sub-block pairs) fused with
// -dmin*d(activation); then the 8-lane tree plus the 4 min lanes.
func ggmlDotQ4KVecDot(cols int, g, x []byte, xStride, nTok int, y []float32, yStride int) {
	nb := cols / 256
	w := g[:nb*144]
	for t := range nTok {
		xt := x[t*xStride : t*xStride+nb*q8KBlock]
		var acc [8]float32
		var accM [4]float32
		for b := range nb {
			wb, yb := w[b*144:(b+1)*144], xt[b*q8KBlock:(b+1)*q8KBlock]
			yd, q8, _ := q8K(yb)
			d := yd * f16At(wb[0:])
			dmin := -yd * f16At(wb[2:])
			var lanes, sub [8]int32
			for j := range 8 {
				sc, _ := q4KScaleMin(wb[4:16], j)
				q4KSubDot(wb, q8, j, &sub)
				for l := range lanes {
					lanes[l] += sc * sub[l]
				}
			}
			for k := range accM {
				_, m0 := q4KScaleMin(wb[4:16], 2*k)
				_, m1 := q4KScaleMin(wb[4:16], 2*k+1)
				p := m0*q8KBSum32(yb, 2*k) + m1*q8KBSum32(yb, 2*k+1)
				accM[k] = FMA32(dmin, float32(p), accM[k])
			}
			for l := range acc {
				acc[l] = FMA32(d, float32(lanes[l]), acc[l])
			}
		}
		y[t*yStride] = ggmlTree8(&acc) + ((accM[0] + accM[2]) + (accM[1] + accM[3]))
	}
}

// ggmlDotQ4K8x8 follows llama.cpp's repacked q4_K_8x8 kernels (x86
// AVX2/AVX-512), where each output row owns one float32 lane and the mins
// have an accumulator of their own, subtracted at the end:
//   - ggml_gemm_q4_K_8x8_q8_K (the batch's tokens in groups of 4): per pair of
//     sub-blocks, the exact integer sc0*dot0 + sc1*dot1 fused with
//     d(weight)*d(activation), and m0*bsum0 + m1*bsum1 fused with
//     dmin*d(activation);
//   - ggml_gemv_q4_K_8x8_q8_K (the 1-3 tokens left over): the same, with
//     the integers summed over the whole super-block before the one fused
//     step per super-block.
//
// llama.cpp quantizes the activations of a 4-token group with
// ggml_quantize_mat_q8_K_4x8, which rounds exactly as quantize_row_q8_K
// (scale -127/max from the value of largest magnitude, round to nearest
// even). Only a tie between +max and -max differs (the repacked quantizer
// takes the positive one, quantize_row_q8_K the first): the block is then
// the exact negation (d, quants, sums), and these products are
// sign-symmetric, so the q8_K rows the engine makes serve both paths
// bit for bit (TestGGMLQ4K8x8TieSignIrrelevant).
func ggmlDotQ4K8x8(cols int, g, x []byte, xStride, nTok int, y []float32, yStride int) {
	nb := cols / 256
	w := g[:nb*144]
	for t := range nTok {
		gemm := t < nTok-nTok%4
		xt := x[t*xStride : t*xStride+nb*q8KBlock]
		var acc, accM float32
		for b := range nb {
			wb, yb := w[b*144:(b+1)*144], xt[b*q8KBlock:(b+1)*q8KBlock]
			yd, q8, _ := q8K(yb)
			ds := f16At(wb[0:]) * yd
			dm := f16At(wb[2:]) * yd
			var sb, mb int32 // the super-block's sums (gemv)
			var sub [8]int32
			for k := range 4 {
				var s, m int32
				for h := range 2 {
					j := 2*k + h
					sc, mn := q4KScaleMin(wb[4:16], j)
					q4KSubDot(wb, q8, j, &sub)
					s += sc * (((sub[0] + sub[1]) + (sub[2] + sub[3])) + ((sub[4] + sub[5]) + (sub[6] + sub[7])))
					m += mn * q8KBSum32(yb, j)
				}
				if gemm {
					acc = FMA32(float32(s), ds, acc)
					accM = FMA32(float32(m), dm, accM)
				} else {
					sb += s
					mb += m
				}
			}
			if !gemm {
				acc = FMA32(float32(sb), ds, acc)
				accM = FMA32(float32(mb), dm, accM)
			}
		}
		y[t*yStride] = acc - accM
	}
}

// ggmlDotQ6KVecDot follows ggml_vec_dot_q6_K_q8_K (AVX2): per super-block
// an exact integer per lane l (values 4l..4l+3 of every 32, times their
// 16-value scales), the -32 offset taken off through the activation block
// sums (lane l: 16-value groups 2l and 2l+1), fused into lane l with
// d(weight)*d(activation); then the 8-lane tree.
func ggmlDotQ6KVecDot(cols int, g, x []byte, xStride, nTok int, y []float32, yStride int) {
	nb := cols / 256
	w := g[:nb*210]
	for t := range nTok {
		xt := x[t*xStride : t*xStride+nb*q8KBlock]
		var acc [8]float32
		for b := range nb {
			wb, yb := w[b*210:(b+1)*210], xt[b*q8KBlock:(b+1)*q8KBlock]
			yd, q8, bsums := q8K(yb)
			d := yd * f16At(wb[208:])
			ql, qh, sc := wb[0:128], wb[128:192], wb[192:208]
			var lanes [8]int32
			// Value e of the super-block (e = 128*half + 32*quarter + l)
			// is built from ql and qh as in the GGUF layout.
			for half := range 2 {
				for l := range 32 {
					h := qh[32*half+l]
					lo, hi := ql[64*half+l], ql[64*half+l+32]
					v := [4]int32{
						int32(lo&0xf | (h&3)<<4),
						int32(hi&0xf | (h>>2&3)<<4),
						int32(lo>>4 | (h>>4&3)<<4),
						int32(hi>>4 | (h>>6&3)<<4),
					}
					for quarter, q := range v {
						e := 128*half + 32*quarter + l
						lanes[l/4] += int32(int8(sc[e/16])) * q * int32(int8(q8[e]))
					}
				}
			}
			for l := range lanes {
				for grp := 2 * l; grp < 2*l+2; grp++ {
					bs := bsum(bsums, grp)
					lanes[l] -= 32 * bs * int32(int8(sc[grp]))
				}
			}
			for l := range acc {
				acc[l] = FMA32(d, float32(lanes[l]), acc[l])
			}
		}
		y[t*yStride] = ggmlTree8(&acc)
	}
}

// ggmlDotQ4K is llama.cpp's q4_K product for a matrix it does not repack:
// the tiled kernel for batches of 8 tokens or more, vec_dot below that.
func ggmlDotQ4K(cols int, g, x []byte, xStride, nTok int, y []float32, yStride int) {
	if nTok >= 8 {
		ggmlDotTiled(gguf.Q4_K, cols, g, x, xStride, nTok, y, yStride)
		return
	}
	ggmlDotQ4KVecDot(cols, g, x, xStride, nTok, y, yStride)
}

// ggmlDotQ6K is ggmlDotQ4K for q6_K.
func ggmlDotQ6K(cols int, g, x []byte, xStride, nTok int, y []float32, yStride int) {
	if nTok >= 8 {
		ggmlDotTiled(gguf.Q6_K, cols, g, x, xStride, nTok, y, yStride)
		return
	}
	ggmlDotQ6KVecDot(cols, g, x, xStride, nTok, y, yStride)
}

// ggmlTiledFused says whether the tiled kernel's last step, acc + r*d
// (an _mm512_add_ps of an _mm512_mul_ps), is contracted into one FMA, as
// GCC does with its default -ffp-contract=fast.
const ggmlTiledFused = true

// ggmlDotTiled follows ggml-cpu's tiled K-quant matmul
// (ggml_compute_forward_mul_mat_tiled, AVX-512 VNNI microkernel), which
// llama.cpp uses for q4_K and q6_K matrices it has not repacked once a
// batch has 8 tokens. Per row, token and super-block: the exact integer
// S1 = sum of scale * (raw dot - bias * block sum) over the sub-blocks
// (q6_K: 16-value sub-blocks, bias 32; q4_K: 32-value, no bias) and, for
// q4_K, S2 = sum of min * block sum; then r = float(S1)*d, for q4_K
// r = r - dmin*float(S2) fused, and the accumulator takes r times the
// activation scale; super-blocks in order.
func ggmlDotTiled(t gguf.Type, cols int, g, x []byte, xStride, nTok int, y []float32, yStride int) {
	nb := cols / 256
	bb := t.BlockBytes()
	w := g[:nb*bb]
	for tok := range nTok {
		xt := x[tok*xStride : tok*xStride+nb*q8KBlock]
		var acc float32
		for b := range nb {
			wb, yb := w[b*bb:(b+1)*bb], xt[b*q8KBlock:(b+1)*q8KBlock]
			yd, q8, _ := q8K(yb)
			var r float32
			if t == gguf.Q4_K {
				var s1, s2 int32
				var sub [8]int32
				for j := range 8 {
					sc, mn := q4KScaleMin(wb[4:16], j)
					q4KSubDot(wb, q8, j, &sub)
					s1 += sc * (((sub[0] + sub[1]) + (sub[2] + sub[3])) + ((sub[4] + sub[5]) + (sub[6] + sub[7])))
					s2 += mn * q8KBSum32(yb, j)
				}
				r = float32(s1) * f16At(wb[0:])
				r = FMA32(-f16At(wb[2:]), float32(s2), r)
			} else {
				r = float32(q6KDot(wb, yb, q8)) * f16At(wb[208:])
			}
			if ggmlTiledFused {
				acc = FMA32(r, yd, acc)
			} else {
				acc += r * yd
			}
		}
		y[tok*yStride] = acc
	}
}

// q6KDot returns the exact integer dot product of a q6_K super-block with
// its q8_K activations: the sum over 16-value groups of scale * (q dot a
// - 32 * group sum).
func q6KDot(wb, yb, q8 []byte) int32 {
	ql, qh, sc := wb[0:128], wb[128:192], wb[192:208]
	var s int32
	for half := range 2 {
		for quarter := range 4 {
			for grp := range 2 { // 16-value groups of this 32
				e0 := 128*half + 32*quarter + 16*grp
				var raw int32
				for l := 16 * grp; l < 16*grp+16; l++ {
					h := qh[32*half+l]
					var q byte
					switch quarter {
					case 0:
						q = ql[64*half+l]&0xf | (h&3)<<4
					case 1:
						q = ql[64*half+l+32]&0xf | (h>>2&3)<<4
					case 2:
						q = ql[64*half+l]>>4 | (h>>4&3)<<4
					default:
						q = ql[64*half+l+32]>>4 | (h>>6&3)<<4
					}
					raw += int32(q) * int32(int8(q8[128*half+32*quarter+l]))
				}
				gi := e0 / 16
				bs := bsum(yb[260:], gi)
				s += int32(int8(sc[gi])) * (raw - 32*bs)
			}
		}
	}
	return s
}

// ggmlDotQ41 follows ggml_vec_dot_q4_1_q8_1 (AVX2 with VNNI), which
// llama.cpp uses for every q4_1 batch size: 8 float32 lanes, lane l taking
// the exact integer sum of values 4l..4l+3 of each block (low nibbles are
// values 0-15, high ones 16-31) fused with d(weight)*d(activation); the
// min terms m*s in one float32 sum of their own, each fused (GCC contracts
// the scalar summs += m*s); then the 8-lane tree plus that sum.
func ggmlDotQ41(cols int, g, x []byte, xStride, nTok int, y []float32, yStride int) {
	nb := cols / 32
	w := g[:nb*20]
	for t := range nTok {
		xt := x[t*xStride : t*xStride+nb*36]
		var acc [8]float32
		var summs float32
		for b := range nb {
			wb, yb := w[b*20:(b+1)*20], xt[b*36:(b+1)*36]
			summs = FMA32(f16At(wb[2:]), f16At(yb[2:]), summs)
			d := f16At(wb[0:]) * f16At(yb[0:])
			qs, a := wb[4:20], yb[4:36]
			for l := range acc {
				var s int32
				for e := 4 * l; e < 4*l+4; e++ {
					q := nibbleAt(qs, e, 16)
					s += int32(q) * int32(int8(a[e]))
				}
				acc[l] = FMA32(d, float32(s), acc[l])
			}
		}
		y[t*yStride] = ggmlTree8(&acc) + summs
	}
}

// nibbleAt is value i of a nibble array whose low nibbles hold values
// 0..half-1 and high nibbles values half..2*half-1 (GGUF's order for the
// quants of q4/q5/MXFP4 blocks and for q3_K's low scale bits).
func nibbleAt(b []byte, i, half int) byte {
	if i >= half {
		return b[i-half] >> 4
	}
	return b[i] & 0xf
}

// ggmlDotQ50 follows ggml_vec_dot_q5_0_q8_0 (one token) and tinyBLAS's
// q5_0 kernel (batches), which sum alike: 8 float32 lanes, lane l taking
// the exact integer sum of values 4l..4l+3 of each block (value e: nibble
// e, low nibbles first, plus bit e of qh times 16, minus 16) fused with
// d(weight)*d(activation); then the 8-lane tree.
func ggmlDotQ50(cols int, g, x []byte, xStride, nTok int, y []float32, yStride int) {
	nb := cols / 32
	w := g[:nb*22]
	for t := range nTok {
		xt := x[t*xStride : t*xStride+nb*34]
		var acc [8]float32
		for b := range nb {
			wb, yb := w[b*22:(b+1)*22], xt[b*34:(b+1)*34]
			d := f16At(wb[0:]) * f16At(yb[0:])
			qh := binary.LittleEndian.Uint32(wb[2:])
			qs, a := wb[6:22], yb[2:34]
			for l := range acc {
				var s int32
				for e := 4 * l; e < 4*l+4; e++ {
					q := nibbleAt(qs, e, 16)
					v := int32(q) | int32(qh>>uint(e)&1)<<4 - 16
					s += v * int32(int8(a[e]))
				}
				acc[l] = FMA32(d, float32(s), acc[l])
			}
		}
		y[t*yStride] = ggmlTree8(&acc)
	}
}
