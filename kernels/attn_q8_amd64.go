//go:build amd64

package kernels

import "unsafe"

// attnValuesQ8AVX2 is AttnValuesQ8 for n >= 1 positions and nb >= 1
// blocks of 32 values.
//
//go:noescape
func attnValuesQ8AVX2(out *float32, v *byte, rowBytes, nb int, w *float32, n int, f16 *float32)

// attnValuesQ8Vec runs AttnValuesQ8 on the AVX2 kernel (the AVX-512 set
// too) and reports whether it did. The caller has checked the bounds.
func (s *Set) attnValuesQ8Vec(out []float32, v []byte, rowBytes int, w []float32) bool {
	if !s.vec() {
		return false
	}
	attnValuesQ8AVX2(unsafe.SliceData(out), unsafe.SliceData(v), rowBytes, len(out)/32,
		unsafe.SliceData(w), len(w), &f16Table[0])
	return true
}

// attnValuesQ8GKAVX512 (K = 1, 2, 4 heads) are AttnValuesQ8Heads for n >= 1
// positions and nb >= 1 blocks; strides are in elements.
//
//go:noescape
func attnValuesQ8G1AVX512(out *float32, outStride int, v *byte, rowBytes, nb int, w *float32, wStride, n int, f16 *float32)

//go:noescape
func attnValuesQ8G2AVX512(out *float32, outStride int, v *byte, rowBytes, nb int, w *float32, wStride, n int, f16 *float32)

//go:noescape
func attnValuesQ8G4AVX512(out *float32, outStride int, v *byte, rowBytes, nb int, w *float32, wStride, n int, f16 *float32)

// attnValuesQ8HeadsVec runs AttnValuesQ8Heads's heads on the AVX-512
// kernels, four at a time, then two, then one, and returns how many it did
// (0 without AVX-512: the caller takes them one by one). The caller has
// checked the bounds and that n >= 1.
func (s *Set) attnValuesQ8HeadsVec(out []float32, hd, G int, v []byte, rowBytes int, w []float32, wStride, n int) int {
	if !s.wide() {
		return 0
	}
	vp, tab := unsafe.SliceData(v), &f16Table[0]
	h := 0
	for h < G {
		o, wp := &out[h*hd], &w[h*wStride]
		switch {
		case G-h >= 4:
			attnValuesQ8G4AVX512(o, hd, vp, rowBytes, hd/32, wp, wStride, n, tab)
			h += 4
		case G-h >= 2:
			attnValuesQ8G2AVX512(o, hd, vp, rowBytes, hd/32, wp, wStride, n, tab)
			h += 2
		default:
			attnValuesQ8G1AVX512(o, hd, vp, rowBytes, hd/32, wp, wStride, n, tab)
			h++
		}
	}
	return G
}

// attnScoresQ8KAVX512 (K = 1, 2, 4 queries) are AttnScoresQ8Heads for m (a
// multiple of 4) rows of headBytes (a multiple of 68: pairs of blocks);
// qBytes is the distance between the queries, strides are in bytes for the
// keys and in elements for y.
//
//go:noescape
func attnScoresQ81AVX512(q *byte, qBytes, headBytes int, keys *byte, stride, m int, y *float32, ystride int)

//go:noescape
func attnScoresQ82AVX512(q *byte, qBytes, headBytes int, keys *byte, stride, m int, y *float32, ystride int)

//go:noescape
func attnScoresQ84AVX512(q *byte, qBytes, headBytes int, keys *byte, stride, m int, y *float32, ystride int)

// attnScoresQ8Vec runs AttnScoresQ8Heads's whole groups of 4 rows on the
// AVX-512 kernels, 4 queries a call, then 2, then 1, and returns how many
// rows it did, or -1 where the set has no such kernel (no AVX-512, or hd
// not a multiple of 64). The caller has checked the bounds.
func (s *Set) attnScoresQ8Vec(q []byte, G, hd int, keys []byte, rowBytes, m int, y []float32, yStride int) int {
	if !s.wide() || hd%64 != 0 {
		return -1
	}
	m4 := m &^ 3
	if m4 == 0 {
		return 0
	}
	hb := hd / 32 * q8Bytes
	kp := unsafe.SliceData(keys)
	for g := 0; g < G; {
		qp, yp := &q[g*hb], &y[g*yStride]
		switch {
		case G-g >= 4:
			attnScoresQ84AVX512(qp, hb, hb, kp, rowBytes, m4, yp, yStride)
			g += 4
		case G-g >= 2:
			attnScoresQ82AVX512(qp, hb, hb, kp, rowBytes, m4, yp, yStride)
			g += 2
		default:
			attnScoresQ81AVX512(qp, hb, hb, kp, rowBytes, m4, yp, yStride)
			g++
		}
	}
	return m4
}
