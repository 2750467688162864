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

// AttnScoresQ8Heads sets y[g*yStride+i] to the score of query g of G
// (Q8_0 rows of hd values, one after the other in q) against the key row
// at keys[i*rowBytes:] (Q8_0), for i < m: attention's scores for the
// query heads that share one KV head of a Q8_0 cache. With AVX-512 and hd
// a multiple of 64, each group of 4 key rows is loaded once for up to 4
// queries and the products summed as attnScoresQ8Generic does (its twin,
// which the generic set runs); other sets and head sizes take DotRows's
// own arithmetic, query by query.
func (s *Set) AttnScoresQ8Heads(q []byte, G, hd int, keys []byte, rowBytes, m int, y []float32, yStride int) {
	if G <= 0 || m <= 0 {
		return
	}
	hb := hd / 32 * q8Bytes
	if hd <= 0 || hd%32 != 0 || len(q) < G*hb || rowBytes < hb || len(keys) < (m-1)*rowBytes+hb ||
		yStride < m || len(y) < (G-1)*yStride+m {
		panic(fmt.Sprintf("kernels: AttnScoresQ8Heads: %d queries of %d values, %d rows %d bytes apart in %d bytes", G, hd, m, rowBytes, len(keys)))
	}
	if s.isa == isaGeneric {
		attnScoresQ8Generic(q, G, hd, keys, rowBytes, m, y, yStride)
		return
	}
	done := s.attnScoresQ8Vec(q, G, hd, keys, rowBytes, m, y, yStride)
	if done < 0 {
		for g := range G {
			s.DotRows(gguf.Q8_0, hd, keys, rowBytes, q[g*hb:(g+1)*hb], y[g*yStride:g*yStride+m])
		}
		return
	}
	if done < m {
		attnScoresQ8Generic(q, G, hd, keys[done*rowBytes:], rowBytes, m-done, y[done:], yStride)
	}
}

// attnScoresQ8Generic is AttnScoresQ8Heads's arithmetic: per (query, row)
// 16 float32 lanes, a pair of blocks a step (lanes 0-7 the first block,
// 8-15 the second, none for an odd last block's missing partner), lane l
// adding the exact sum of 4 products (quants 4(l%8) to 4(l%8)+3) times
// the product of the two blocks' scales with a fused multiply-add; then
// the AVX-512 reduction tree (sum16).
func attnScoresQ8Generic(q []byte, G, hd int, keys []byte, rowBytes, m int, y []float32, yStride int) {
	nb := hd / 32
	hb := nb * q8Bytes
	tab := f16Table
	for i := range m {
		k := keys[i*rowBytes : i*rowBytes+hb]
		for g := range G {
			x := q[g*hb : (g+1)*hb]
			var acc [16]float32
			for b := range nb {
				kb, xb := k[b*q8Bytes:(b+1)*q8Bytes], x[b*q8Bytes:(b+1)*q8Bytes]
				sc := tab[uint16(kb[0])|uint16(kb[1])<<8] * tab[uint16(xb[0])|uint16(xb[1])<<8]
				for l := range 8 {
					var sum int32
					for j := 4 * l; j < 4*l+4; j++ {
						sum += int32(int8(kb[2+j])) * int32(int8(xb[2+j]))
					}
					acc[8*(b%2)+l] = FMA32(float32(sum), sc, acc[8*(b%2)+l])
				}
			}
			y[g*yStride+i] = sum16(&acc)
		}
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
