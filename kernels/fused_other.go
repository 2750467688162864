//go:build !amd64

package kernels

// fusedTilesQ41 has no kernel on this architecture.
func (s *Set) fusedTilesQ41(m *Matrix, xq []byte, nTok int, y []float32, r0, r1 int) (rowsDone, toksDone int, ok bool) {
	return 0, 0, false
}

func (s *Set) expSubVec(x []float32, sub float32) int { return 0 }

func (s *Set) swigluVec(dst, g, u []float32) int { return 0 }

func (s *Set) f16EncodeVec(dst []uint16, src []float32) int { return 0 }

func (s *Set) quantizeQ8Vec(sum bool, src []float32, dst []byte) bool { return false }
