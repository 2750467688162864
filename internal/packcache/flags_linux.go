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

// Populate prefaults the page tables of b, a page-aligned piece of an
// entry's Data, as populate does; the engine runs it ahead of the first
// forward pass over a trusted entry. It reports whether the kernel did it
// (false: the pages fault in as they are read).
func Populate(b []byte) bool {
	return len(b) == 0 || unix.Madvise(b, unix.MADV_POPULATE_READ) == nil
}

// hugePages asks that the pages of the mapping m come in as huge pages
// where the kernel can: a page of the entry not in the page cache is then
// read ahead in 2 MiB folios, which map with one page-table entry each, so
// the next open populates 1.3 GB in about a millisecond instead of tens.
// A hint; failure changes nothing.
func hugePages(m []byte) {
	_ = unix.Madvise(m, unix.MADV_HUGEPAGE)
}

// statFile returns the state of the open file fd that a stamp records.
func statFile(fd uintptr) (fileState, bool) {
	var st unix.Stat_t
	if err := unix.Fstat(int(fd), &st); err != nil {
		return fileState{}, false
	}
	return fileState{
		Dev: uint64(st.Dev), Ino: uint64(st.Ino), Size: st.Size,
		Mtime: st.Mtim.Nano(), Ctime: st.Ctim.Nano(),
	}, true
}
