package engine

import (
	"flag"
	"testing"

	"github.com/moonlm/moonlm/kernels"
)

// kernelsFlag names the kernel set the reference and golden tests compute
// with (go test ./engine/ -args -kernels=generic); empty means the set
// kernels.Detect picks.
var kernelsFlag = flag.String("kernels", "", "kernel set for the reference and golden tests: generic, avx2, avx512 (default: detected)")

// testKernels returns the kernel set -kernels names, nil for the detected
// one; a set this CPU cannot run skips the test.
func testKernels(t testing.TB) *kernels.Set {
	t.Helper()
	if *kernelsFlag == "" {
		return nil
	}
	ks, err := kernels.New(*kernelsFlag)
	if err != nil {
		t.Skipf("-kernels=%s: %v", *kernelsFlag, err)
	}
	return ks
}
