//go:build amd64 && linux

package kernels

import "syscall"

// amxGrant asks Linux for this process's permission to use the AMX tile
// data (arch_prctl ARCH_REQ_XCOMP_PERM, XTILEDATA), without which the first
// tile instruction faults; a refusal leaves the AVX-512 kernels.
func amxGrant() bool {
	const archReqXcompPerm, xfeatureXtiledata = 0x1023, 18
	_, _, errno := syscall.RawSyscall(syscall.SYS_ARCH_PRCTL, archReqXcompPerm, xfeatureXtiledata, 0)
	return errno == 0
}
