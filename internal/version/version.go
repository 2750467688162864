// Package version holds the library's version and C ABI version for the Go
// side (the CLI's "moonlm version"); include/moonlm.h is the source of
// truth for C, and a test keeps the two equal.
package version

// Library is MOONLM_VERSION_STRING.
const Library = "0.1.0"

// ABI is MOONLM_ABI_VERSION: bumped on every incompatible change to the C
// API.
const ABI = 1
