//go:build !linux

package packcache

const mapPopulate = 0

// populate is a no-op where MADV_POPULATE_READ does not exist: pages fault
// in as the checksum reads them.
func populate([]byte) {}

// Populate does nothing here: pages fault in as they are read.
func Populate([]byte) bool { return false }

func hugePages([]byte) {}

// statFile has no stamps to support here: every open verifies the data.
func statFile(uintptr) (fileState, bool) { return fileState{}, false }
