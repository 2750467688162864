package packcache

import "golang.org/x/sys/unix"

// mapPopulate prefaults the page tables of a new mapping in one call:
// validation reads every page right away, and one fault per 4 KiB page
// would cost about a quarter of Get's time.
const mapPopulate = unix.MAP_POPULATE

// populate prefaults the page tables of b (page-aligned start) for reading
// in one call, as mapPopulate does for a whole mapping: a lazily verified
// entry populates each piece right before checksumming it, on the
// checksum's goroutines. Failure (a kernel without MADV_POPULATE_READ) only
// leaves the pages to fault one by one.
func populate(b []byte) {
	if len(b) > 0 {
		_ = unix.Madvise(b, unix.MADV_POPULATE_READ)
	}
}
