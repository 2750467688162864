package packcache

import (
	"encoding/binary"
	"hash/crc32"
	"hash/crc64"
)

var (
	crc64ECMA = crc64.MakeTable(crc64.ECMA)
	crc64ISO  = crc64.MakeTable(crc64.ISO)
)

// Digest is the 32-byte fingerprint of b used for Key.Header and entry
// names: two CRC-64s with different polynomials, a CRC-32C and the length.
// The cache needs a fingerprint, not a defence against forgery (the whole
// key is stored in the entry and compared, and the data is checksummed),
// and crypto/sha256 would pull Go's FIPS crypto module (about 150 KB) into
// the shared library, whose size is a goal.
func Digest(b []byte) [32]byte {
	var d [32]byte
	binary.LittleEndian.PutUint64(d[0:], crc64.Checksum(b, crc64ECMA))
	binary.LittleEndian.PutUint64(d[8:], crc64.Checksum(b, crc64ISO))
	binary.LittleEndian.PutUint32(d[16:], crc32.Checksum(b, castagnoli))
	binary.LittleEndian.PutUint64(d[20:], uint64(len(b)))
	return d
}
