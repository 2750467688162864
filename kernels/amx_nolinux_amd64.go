//go:build amd64 && !linux

package kernels

// amxGrant is false where the engine does not know how the OS grants the
// AMX tile state.
func amxGrant() bool { return false }
