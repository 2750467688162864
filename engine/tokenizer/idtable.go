package tokenizer

import "hash/maphash"

// idTable maps token text to id: open addressing over a power-of-two slot
// array, each slot holding the top 32 bits of the text's hash and id+1 (0
// for empty). It builds several times faster than a map[string]int32 for
// large vocabularies, holds no pointers for the GC to scan, and looks up
// []byte keys without converting them.
type idTable struct {
	seed  maphash.Seed
	slots []uint64
	mask  uint64
	text  *strs
}

func newIDTable(text *strs) *idTable {
	size := uint64(16)
	for size < 2*uint64(text.len()) {
		size <<= 1
	}
	m := &idTable{seed: maphash.MakeSeed(), slots: make([]uint64, size), mask: size - 1, text: text}
	for id := 0; id < text.len(); id++ {
		m.put(text.at(id), int32(id))
	}
	return m
}

// put maps s to id; a later id for the same text replaces an earlier one,
// as in llama.cpp.
func (m *idTable) put(s string, id int32) {
	h := maphash.String(m.seed, s)
	tag := h &^ 0xFFFFFFFF
	for i := h & m.mask; ; i = (i + 1) & m.mask {
		v := m.slots[i]
		if v == 0 {
			m.slots[i] = tag | uint64(uint32(id)+1)
			return
		}
		if v&^0xFFFFFFFF == tag && m.text.at(int(uint32(v)-1)) == s {
			m.slots[i] = tag | uint64(uint32(id)+1)
			return
		}
	}
}

// get returns the id of s, or -1.
func (m *idTable) get(s string) int32 {
	h := maphash.String(m.seed, s)
	tag := h &^ 0xFFFFFFFF
	for i := h & m.mask; ; i = (i + 1) & m.mask {
		v := m.slots[i]
		if v == 0 {
			return -1
		}
		if v&^0xFFFFFFFF == tag && m.text.at(int(uint32(v)-1)) == s {
			return int32(uint32(v) - 1)
		}
	}
}

// getBytes is get for a byte slice.
func (m *idTable) getBytes(b []byte) int32 {
	h := maphash.Bytes(m.seed, b)
	tag := h &^ 0xFFFFFFFF
	for i := h & m.mask; ; i = (i + 1) & m.mask {
		v := m.slots[i]
		if v == 0 {
			return -1
		}
		if v&^0xFFFFFFFF == tag && m.text.at(int(uint32(v)-1)) == string(b) {
			return int32(uint32(v) - 1)
		}
	}
}

// pairTable maps a pair of token ids to a merge (rank<<32 | result id):
// open addressing with Fibonacci hashing, pointer-free, for the hundreds of
// thousands of merges of large BPE vocabularies.
type pairTable struct {
	slots []pairSlot
	shift uint
	n     int
}

type pairSlot struct{ key, val uint64 }

const emptyPair = ^uint64(0) // ids are below 2^31, so no key has all bits set

func newPairTable(n int) *pairTable {
	size, bits := 16, uint(4)
	for size < n+n/2 {
		size <<= 1
		bits++
	}
	p := &pairTable{slots: make([]pairSlot, size), shift: 64 - bits}
	for i := range p.slots {
		p.slots[i].key = emptyPair
	}
	return p
}

func pairKey(l, r int32) uint64 { return uint64(uint32(l))<<32 | uint64(uint32(r)) }

// add inserts key unless present (the first, lowest-ranked merge wins).
func (p *pairTable) add(key, val uint64) {
	mask := uint64(len(p.slots) - 1)
	for i := (key * 0x9E3779B97F4A7C15) >> p.shift; ; i = (i + 1) & mask {
		s := &p.slots[i]
		if s.key == emptyPair {
			s.key, s.val = key, val
			p.n++
			return
		}
		if s.key == key {
			return
		}
	}
}

func (p *pairTable) get(key uint64) (uint64, bool) {
	mask := uint64(len(p.slots) - 1)
	for i := (key * 0x9E3779B97F4A7C15) >> p.shift; ; i = (i + 1) & mask {
		s := &p.slots[i]
		if s.key == key {
			return s.val, true
		}
		if s.key == emptyPair {
			return 0, false
		}
	}
}
