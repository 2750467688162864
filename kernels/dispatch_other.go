//go:build !amd64

package kernels

// archSets lists the kernel sets of this architecture: only the generic
// one.
func archSets() []setDef { return []setDef{genericDef} }

// hasGFNI reports false: there are no GFNI kernels here.
func hasGFNI() bool { return false }
