//go:build amd64

package kernels

// f16EncodeF16C converts n float32 (a multiple of 8) to f16 with F16C.
//
//go:noescape
func f16EncodeF16C(dst *uint16, src *float32, n int)

// f16EncodeVec converts the multiple-of-8 head of src into dst with F16C
// (which every SIMD set here implies) and returns how many it did.
func (s *Set) f16EncodeVec(dst []uint16, src []float32) int {
	n := len(src) &^ 7
	if n == 0 || !s.vec() {
		return 0
	}
	_ = dst[n-1]
	f16EncodeF16C(&dst[0], &src[0], n)
	return n
}
