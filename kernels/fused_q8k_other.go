//go:build !amd64

package kernels

// quantizeQ8KVec has no vector kernel on this architecture.
func (s *Set) quantizeQ8KVec(src []float32, dst []byte) bool { return false }
