//go:build !amd64

package kernels

// init applies MOONLM_KERNELS on architectures with only the generic
// kernels, so a request for a SIMD set is reported rather than ignored.
func init() {
	chooseDefaultVariant()
}
