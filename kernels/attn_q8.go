package kernels

import (
	"fmt"

	"github.com/moonlm/moonlm/gguf"
)

// q8Bytes is the size of one Q8_0 block: an f16 scale and 32 quants.
const q8Bytes = 34

// DotRows sets y[i] to the dot product of the row of type t at
// w[i*rowBytes:] (n values) with xq (converted by QuantizeAct to the
// type's activation type), for len(y) rows rowBytes bytes apart: a row of
// a matrix, or the keys of one KV head in a cache that interleaves the
// heads. Each y[i] is DotRow's result for that row.
func (s *Set) DotRows(t gguf.Type, n int, w []byte, rowBytes int, xq []byte, y []float32) {
	if len(y) == 0 {
		return
	}
	rb := RowBytes(t, n)
	if rowBytes < rb || len(w) < (len(y)-1)*rowBytes+rb {
		panic(fmt.Sprintf("kernels: DotRows: %d rows of %d bytes, %d apart, in %d bytes", len(y), rb, rowBytes, len(w)))
	}
	if rows := s.types[t].rows; rows != nil {
		rows(n, w, rowBytes, xq, y)
		return
	}
	dot := s.dotFor(t, "DotRows")
	for i := range y {
		y[i] = dot(n, w[i*rowBytes:i*rowBytes+rb], xq)
	}
}

// DotRowsHeads is DotRows for G activations xq (each ActivationBytes(t, n)
// bytes, one after the other) against the same m rows: y[g*yStride+i] is
// DotRows's result for activation g and row i, bit for bit. Attention
// calls it with the query heads that share a KV head: the rows go by
// tiles of dotRowsTile, each tile taken by all G activations in turn while
// it is in the first-level cache, so a long context's keys are read from
// memory once per KV head instead of once per query head.
func (s *Set) DotRowsHeads(t gguf.Type, n int, w []byte, rowBytes int, xq []byte, G int, y []float32, yStride, m int) {
	if G <= 0 || m <= 0 {
		return
	}
	xb := ActivationBytes(t, n)
	if xb <= 0 || len(xq) < G*xb || yStride < m || len(y) < (G-1)*yStride+m {
		panic(fmt.Sprintf("kernels: DotRowsHeads: %d activations of %d bytes in %d, %d results %d apart in %d", G, xb, len(xq), m, yStride, len(y)))
	}
	for i := 0; i < m; i += dotRowsTile {
		k := min(dotRowsTile, m-i)
		for g := range G {
			s.DotRows(t, n, w[i*rowBytes:], rowBytes, xq[g*xb:(g+1)*xb], y[g*yStride+i:g*yStride+i+k])
		}
	}
}

// dotRowsTile is DotRowsHeads's rows per tile: 64 key rows of a 128-value
// Q8_0 head touch 64 x 3 cache lines, a quarter of a 48 KiB first-level
// cache.
const dotRowsTile = 64

// AttnValuesQ8 sets out (len(out) values, a multiple of 32) to the sum
// over positions j of w[j] times the Q8_0 row at v[j*rowBytes:] (the
// values of one KV head at position j): attention's output over a Q8_0
// value cache, with the softmax weights w. Each block's scale is folded
// into its weight (w[j] times the scale, rounded to float32), and every
// output value sums its products with fused multiply-adds, the even
// positions and the odd ones apart, the two sums added at the end: the
// SIMD kernels compute the same bits.
func (s *Set) AttnValuesQ8(out []float32, v []byte, rowBytes int, w []float32) {
	nb := len(out) / 32
	if len(out)%32 != 0 || rowBytes < nb*q8Bytes || (len(w) > 0 && len(v) < (len(w)-1)*rowBytes+nb*q8Bytes) {
		panic(fmt.Sprintf("kernels: AttnValuesQ8: %d values, %d rows %d bytes apart in %d bytes", len(out), len(w), rowBytes, len(v)))
	}
	if len(w) == 0 || nb == 0 {
		clear(out)
		return
	}
	if s.attnValuesQ8Vec(out, v, rowBytes, w) {
		return
	}
	attnValuesQ8Generic(out, v, rowBytes, w)
}

func attnValuesQ8Generic(out []float32, v []byte, rowBytes int, w []float32) {
	tab := f16Table
	for b := 0; b < len(out)/32; b++ {
		var even, odd [32]float32
		for j, wj := range w {
			blk := v[j*rowBytes+b*q8Bytes : j*rowBytes+(b+1)*q8Bytes]
			ws := wj * tab[uint16(blk[0])|uint16(blk[1])<<8]
			acc := &even
			if j&1 == 1 {
				acc = &odd
			}
			for i, q := range blk[2:] {
				acc[i] = FMA32(ws, float32(int8(q)), acc[i])
			}
		}
		o := out[b*32 : b*32+32]
		for i := range o {
			o[i] = even[i] + odd[i]
		}
	}
}

// AttnValuesQ8Heads is AttnValuesQ8 for the G query heads that share one
// KV head's values (grouped-query attention): out[h*hd:(h+1)*hd] is the
// output of the weights w[h*wStride:][:n], bit for bit what AttnValuesQ8
// gives for that head alone. The AVX-512 kernels load and convert each
// position's block once for up to four heads, so the values of a long
// context are read from memory once per KV head instead of once per query
// head.
func (s *Set) AttnValuesQ8Heads(out []float32, hd, G int, v []byte, rowBytes int, w []float32, wStride, n int) {
	if G <= 0 {
		return
	}
	nb := hd / 32
	if hd <= 0 || hd%32 != 0 || len(out) < G*hd || n < 0 || wStride < n || len(w) < (G-1)*wStride+n ||
		rowBytes < nb*q8Bytes || (n > 0 && len(v) < (n-1)*rowBytes+nb*q8Bytes) {
		panic(fmt.Sprintf("kernels: AttnValuesQ8Heads: %d heads of %d values, %d rows %d bytes apart in %d bytes", G, hd, n, rowBytes, len(v)))
	}
	if n == 0 {
		clear(out[:G*hd])
		return
	}
	h := s.attnValuesQ8HeadsVec(out, hd, G, v, rowBytes, w, wStride, n)
	for ; h < G; h++ {
		s.AttnValuesQ8(out[h*hd:(h+1)*hd], v, rowBytes, w[h*wStride:h*wStride+n])
	}
}
