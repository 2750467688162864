//go:build !amd64

package kernels

// mxfp4Tok4 is the set's four-token MXFP4 kernel: the generic one, the
// only set of this architecture.
func (s *Set) mxfp4Tok4() mxfp4Tok4Func { return dotMXFP4Tok4Generic }
