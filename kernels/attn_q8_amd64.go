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
