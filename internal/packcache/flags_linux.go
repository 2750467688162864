package packcache

import "golang.org/x/sys/unix"

// mapPopulate prefaults the page tables of a new mapping in one call:
// validation reads every page right away, and one fault per 4 KiB page
// would cost about a quarter of Get's time.
const mapPopulate = unix.MAP_POPULATE
