//go:build amd64

package kernels

import "unsafe"

// attnMultiKAVX512 (K = 1..4 queries) compute m (a multiple of 4) rows of
// AttnDotF16RowsMulti; strides are in elements.
//
//go:noescape
func attnMulti1AVX512(x *float32, xstride, n int, rows *uint16, stride, m int, y *float32, ystride int)

//go:noescape
func attnMulti2AVX512(x *float32, xstride, n int, rows *uint16, stride, m int, y *float32, ystride int)

//go:noescape
func attnMulti3AVX512(x *float32, xstride, n int, rows *uint16, stride, m int, y *float32, ystride int)

//go:noescape
func attnMulti4AVX512(x *float32, xstride, n int, rows *uint16, stride, m int, y *float32, ystride int)

// attnMultiVec runs the whole groups of 4 rows of nx (1-4) queries on the
// AVX-512 kernel and returns how many rows it did (0 without AVX-512). The
// caller has checked the bounds.
func (s *Set) attnMultiVec(x []float32, nx, xStride, n int, rows []uint16, stride, m int, y []float32, yStride int) int {
	m4 := m &^ 3
	if !s.wide() || m4 == 0 {
		return 0
	}
	xp, rp, yp := unsafe.SliceData(x), unsafe.SliceData(rows), unsafe.SliceData(y)
	switch nx {
	case 1:
		attnMulti1AVX512(xp, xStride, n, rp, stride, m4, yp, yStride)
	case 2:
		attnMulti2AVX512(xp, xStride, n, rp, stride, m4, yp, yStride)
	case 3:
		attnMulti3AVX512(xp, xStride, n, rp, stride, m4, yp, yStride)
	default:
		attnMulti4AVX512(xp, xStride, n, rp, stride, m4, yp, yStride)
	}
	return m4
}

// roundF16AVX512 is RoundF16 over n values, a multiple of 16.
//
//go:noescape
func roundF16AVX512(dst, src *float32, n int)

// roundF16Vec rounds the multiple-of-16 head of src on the AVX-512 kernel
// and returns how many values it did.
func (s *Set) roundF16Vec(dst, src []float32) int {
	n := len(src) &^ 15
	if !s.wide() || n == 0 {
		return 0
	}
	_ = dst[n-1]
	roundF16AVX512(&dst[0], &src[0], n)
	return n
}

// attnHeadsVec runs AttnScoresF16Heads's whole groups of 4 keys for groups
// of exactly 4 query heads (the common shape) with direct calls of the
// 4-query kernel, and returns how many keys it did (0: the caller's loop
// does them). The keys go by tiles of whole groups of 4 positions, about
// 16 KiB, each finished for every KV head before the next: one call per
// KV head and tile rather than per 4 positions, the tile read from memory
// once, front to back, and then from the first-level cache. The caller
// has checked the bounds.
func (s *Set) attnHeadsVec(q []float32, kvHeads, G, hd int, keys []uint16, stride, m int, y []float32, yStride int) int {
	m4 := m &^ 3
	if !s.wide() || G != 4 || m4 == 0 {
		return 0
	}
	tile := max(4, (16<<10)/(2*stride)&^3)
	qp, kp, yp := unsafe.SliceData(q), unsafe.SliceData(keys), unsafe.SliceData(y)
	for i := 0; i < m4; i += tile {
		k := min(tile, m4-i)
		for g := range kvHeads {
			attnMulti4AVX512((*float32)(unsafe.Add(unsafe.Pointer(qp), 4*g*4*hd)), hd, hd,
				(*uint16)(unsafe.Add(unsafe.Pointer(kp), 2*(i*stride+g*hd))), stride, k,
				(*float32)(unsafe.Add(unsafe.Pointer(yp), 4*(g*4*yStride+i))), yStride)
		}
	}
	return m4
}
