//go:build !linux

package packcache

const mapPopulate = 0

// populate is a no-op where MADV_POPULATE_READ does not exist: pages fault
// in as the checksum reads them.
func populate([]byte) {}
