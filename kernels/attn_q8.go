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
