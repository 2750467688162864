// Package abitest tests libmoonlm.so through its C ABI, the way a foreign
// program sees it: the tests load the built library with purego (no cgo in
// the test binary, so they also run with CGO_ENABLED=0 and under -race) and
// call every function in include/moonlm.h, including each kind of misuse.
//
// The library is $MOONLM_LIBRARY (the Makefile exports it); without it the
// tests build one into a temporary folder, under GOEXPERIMENT=cgocheck2 so
// that any Go pointer passed to C is caught, or skip if that is impossible.
package abitest
