package engine

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"hash"
	"hash/crc32"
	"hash/crc64"
	"hash/fnv"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"unsafe"

	"github.com/moonlm/moonlm/gguf"
)

// A session's saved state is one little-endian byte string:
//
//	offset size
//	0      8    magic "MOONLMKV"
//	8      4    format version (stateVersion)
//	12     4    header size (stateHeaderSize)
//	16     32   the model's fingerprint (Model.Fingerprint)
//	48     32   the architecture name, NUL-padded (for messages)
//	80     4    layers
//	84     4    KV width: KV heads x head dimension
//	88     4    vocabulary size
//	92     4    KV element type (ggml numbering: 0 f32, 1 f16, 8 q8_0)
//	96     4    numerics (Numerics)
//	100    4    flags (0)
//	104    8    the saving session's context size
//	112    8    positions held, n
//	120    8    payload bytes after the header, without the checksum
//	128    4    KV layers: the layers with a KV cache (attention layers)
//	132    4    recurrent layers (layers + recurrent layers = KV layers)
//	136    8    values (float32) of one recurrent layer's state
//	144    16   reserved (0)
//	160         n tokens (int32)
//	            per KV layer: the keys, n rows of KV width values (position-
//	            major), then the values, KV width rows of n values (one row
//	            per KV head dimension); for q8_0 the values are n rows of
//	            KV width values too, and every row is Q8_0 blocks
//	            per recurrent layer: its state (the convolution's last
//	            inputs, then the DeltaNet matrices), float32
//	end-4  4    CRC-32C of every byte before it
//
// A hybrid model's checkpoints are not saved: a loaded session can go
// back only by evaluating from position 0 (or from checkpoints it takes
// afterwards).
//
// A reader checks the sizes against the header and each other, the
// checksum, the tokens against the vocabulary and the identity against
// its session before touching the session, so a truncated, corrupted or
// hostile string is refused with an error and the session is unchanged.
const (
	stateMagic      = "MOONLMKV"
	stateVersion    = 3 // 1 fingerprinted with SHA-256; 2 had no recurrent layers
	stateHeaderSize = 160
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// stateHeader is the header's fields.
type stateHeader struct {
	fingerprint [32]byte
	arch        string
	layers      uint32
	kvDim       uint32
	vocab       uint32
	kvType      uint32
	numerics    uint32
	flags       uint32
	nCtx        uint64
	nPos        uint64
	payload     uint64
	kvLayers    uint32
	recLayers   uint32
	recFloats   uint64
}

// Fingerprint identifies the model a saved state belongs to: a 256-bit
// hash (FNV-1a 128, then CRC-64 ECMA and CRC-64 ISO, see modelHash) of
// the file's size and every byte before its tensor data (all metadata and
// the tensor table: names, types, shapes, offsets), so a state is refused
// by a model with other hyperparameters, tokenizer, quantization or tensor
// layout. It tells model files apart; it is not a defence against a
// forged file (a state is the caller's own data and is checked for
// consistency anyway), and crypto/sha256 would pull Go's FIPS crypto
// module into the shared library, whose size is a goal. Two files that
// differ only inside the tensor data (the same metadata, the same tensor
// table) are not told apart; hashing every weight would read the whole
// file. A model built by OpenFile from a gguf.File hashes its metadata
// keys and tensor table instead (it has no mapping to read the header
// from), so its states and those of the same file opened with Open do not
// load into each other.
func (m *Model) Fingerprint() [32]byte {
	m.fpOnce.Do(func() {
		h := newModelHash()
		io.WriteString(h, "moonlm model fingerprint 2\x00")
		if m.mapping != nil {
			writeU64(h, uint64(len(m.mapping)))
			h.Write(m.mapping[:min(m.f.DataOffset, int64(len(m.mapping)))])
		} else {
			for _, k := range m.f.Keys() {
				io.WriteString(h, k)
				h.Write([]byte{0})
			}
			for _, t := range m.f.Tensors() {
				io.WriteString(h, t.Name)
				h.Write([]byte{0})
				writeU64(h, uint64(t.Type))
				for _, d := range t.Shape {
					writeU64(h, uint64(d))
				}
				writeU64(h, uint64(t.Offset))
			}
		}
		h.Sum(m.fp[:0])
	})
	return m.fp
}

var (
	crc64ECMA = crc64.MakeTable(crc64.ECMA)
	crc64ISO  = crc64.MakeTable(crc64.ISO)
)

// modelHash is the fingerprint's hash: FNV-1a 128 and two CRC-64s with
// different polynomials over the same bytes, 32 bytes in all.
type modelHash struct {
	fnv       hash.Hash
	ecma, iso hash.Hash64
}

func newModelHash() *modelHash {
	return &modelHash{fnv: fnv.New128a(), ecma: crc64.New(crc64ECMA), iso: crc64.New(crc64ISO)}
}

func (h *modelHash) Write(b []byte) (int, error) {
	h.fnv.Write(b)
	h.ecma.Write(b)
	h.iso.Write(b)
	return len(b), nil
}

// Sum appends the 32-byte digest to b.
func (h *modelHash) Sum(b []byte) []byte {
	b = h.fnv.Sum(b)
	b = binary.LittleEndian.AppendUint64(b, h.ecma.Sum64())
	return binary.LittleEndian.AppendUint64(b, h.iso.Sum64())
}

func writeU64(h io.Writer, v uint64) {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], v)
	h.Write(b[:])
}

// header describes the session's state as a saved header would.
func (s *Session) header() stateHeader {
	// A model whose layers differ in KV width (or share caches) saves its
	// cache layers as one layer of their summed width: the same bytes, in
	// the same order, as the per-layer sizes would give.
	layers, kvDim := s.c.Layers, s.cache.dims[0]
	if s.c.Shapes != nil {
		layers, kvDim = 1, s.cache.totalDim()
	}
	h := stateHeader{
		fingerprint: s.m.Fingerprint(),
		arch:        s.c.Arch,
		layers:      uint32(layers),
		kvDim:       uint32(kvDim),
		vocab:       uint32(s.m.embd.Rows),
		kvType:      1,
		numerics:    uint32(s.m.numerics),
		nCtx:        uint64(s.nCtx),
		nPos:        uint64(s.pos),
		kvLayers:    uint32(layers),
	}
	if r := s.rec; r != nil {
		h.recLayers = uint32(len(r.state) / (r.conv + r.ssm))
		h.kvLayers -= h.recLayers
		h.recFloats = uint64(r.conv + r.ssm)
	}
	switch {
	case s.cache.f32:
		h.kvType = 0
	case s.cache.q8:
		h.kvType = uint32(gguf.Q8_0)
	}
	h.payload = payloadBytes(h)
	return h
}

// payloadBytes is the size of the tokens and KV data a header announces,
// or 0 if it overflows (sizes are bounded before this is trusted).
func payloadBytes(h stateHeader) uint64 {
	if h.nPos > 1<<32 || h.kvDim > 1<<24 || h.layers > 1<<16 || h.recFloats > 1<<36 ||
		uint64(h.kvLayers)+uint64(h.recLayers) != uint64(h.layers) || (h.recLayers == 0) != (h.recFloats == 0) {
		return 0
	}
	row := uint64(h.kvDim) * 2
	switch gguf.Type(h.kvType) {
	case gguf.F32:
		row = uint64(h.kvDim) * 4
	case gguf.Q8_0:
		if h.kvDim%32 != 0 {
			return 0
		}
		row = uint64(h.kvDim) / 32 * q8Block
	}
	return 4*h.nPos + uint64(h.kvLayers)*2*h.nPos*row + uint64(h.recLayers)*4*h.recFloats
}

func (h stateHeader) encode() []byte {
	b := make([]byte, stateHeaderSize)
	copy(b, stateMagic)
	le := binary.LittleEndian
	le.PutUint32(b[8:], stateVersion)
	le.PutUint32(b[12:], stateHeaderSize)
	copy(b[16:48], h.fingerprint[:])
	copy(b[48:80], h.arch)
	le.PutUint32(b[80:], h.layers)
	le.PutUint32(b[84:], h.kvDim)
	le.PutUint32(b[88:], h.vocab)
	le.PutUint32(b[92:], h.kvType)
	le.PutUint32(b[96:], h.numerics)
	le.PutUint32(b[100:], h.flags)
	le.PutUint64(b[104:], h.nCtx)
	le.PutUint64(b[112:], h.nPos)
	le.PutUint64(b[120:], h.payload)
	le.PutUint32(b[128:], h.kvLayers)
	le.PutUint32(b[132:], h.recLayers)
	le.PutUint64(b[136:], h.recFloats)
	return b
}

// StateSize is the size in bytes of the session's saved state.
func (s *Session) StateSize() (int64, error) {
	if err := s.enter("state size"); err != nil {
		return 0, err
	}
	defer s.leave()
	return stateHeaderSize + int64(s.header().payload) + 4, nil
}

// hostLittleEndian is true on the hosts whose memory order the format
// uses; the cache's arrays are written as they lie in memory.
var hostLittleEndian = func() bool {
	x := uint16(1)
	return *(*byte)(unsafe.Pointer(&x)) == 1
}()

// WriteState writes the session's state (see the format above) to w and
// returns the bytes written. It costs what it writes: the header, the
// tokens and the held positions of the cache.
func (s *Session) WriteState(w io.Writer) (int64, error) {
	if err := s.enter("save state"); err != nil {
		return 0, err
	}
	defer s.leave()
	if !hostLittleEndian {
		return 0, fmt.Errorf("engine: save state: %w: the state format is little-endian", ErrUnsupported)
	}
	cw := &crcWriter{w: w}
	h := s.header()
	n := s.pos
	cw.write(h.encode())
	if n > 0 {
		cw.write(unsafe.Slice((*byte)(unsafe.Pointer(&s.hist[0])), 4*n))
	}
	for il := 0; il < s.cache.nLayer; il++ {
		if !s.c.Recurrent(il) {
			s.cache.layerChunks(il, n, cw.write)
		}
	}
	if r := s.rec; r != nil {
		cw.write(unsafe.Slice((*byte)(unsafe.Pointer(&r.state[0])), 4*len(r.state)))
	}
	var sum [4]byte
	binary.LittleEndian.PutUint32(sum[:], cw.crc)
	cw.write(sum[:])
	if cw.err != nil {
		return cw.n, fmt.Errorf("engine: save state: %w: %w", ErrIO, cw.err)
	}
	return cw.n, nil
}

// crcWriter writes through to w, keeping the CRC-32C of what it wrote and
// the first error.
type crcWriter struct {
	w   io.Writer
	crc uint32
	n   int64
	err error
}

func (c *crcWriter) write(b []byte) {
	if c.err != nil {
		return
	}
	c.crc = crc32.Update(c.crc, crcTable, b)
	n, err := c.w.Write(b)
	c.n += int64(n)
	c.err = err
}

// SaveState is WriteState into a new byte slice.
func (s *Session) SaveState() ([]byte, error) {
	size, err := s.StateSize()
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.Grow(int(size))
	if _, err := s.WriteState(&b); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// SaveStateFile writes the session's state to path, through a temporary
// file in the same folder renamed over path at the end, so path never
// holds half a state.
func (s *Session) SaveStateFile(path string) (err error) {
	f, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("engine: save state: %w: %w", ErrIO, err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	bw := bufio.NewWriterSize(f, 1<<20)
	if _, err := s.WriteState(bw); err != nil {
		return err
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("engine: save state %s: %w: %w", path, ErrIO, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("engine: save state %s: %w: %w", path, ErrIO, err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("engine: save state %s: %w: %w", path, ErrIO, err)
	}
	return nil
}

// parseState checks data as a whole saved state (sizes, checksum,
// version) and returns its header; it trusts nothing in data before
// checking it and never allocates from a size it read.
func parseState(data []byte) (stateHeader, error) {
	var h stateHeader
	if len(data) < stateHeaderSize+4 {
		return h, fmt.Errorf("%w: %d bytes is too short for a saved state (header %d)", ErrBadFile, len(data), stateHeaderSize)
	}
	if string(data[:8]) != stateMagic {
		return h, fmt.Errorf("%w: not a moonlm saved state (magic %q)", ErrBadFile, data[:8])
	}
	le := binary.LittleEndian
	if v := le.Uint32(data[8:]); v != stateVersion {
		if v > stateVersion {
			return h, fmt.Errorf("%w: saved state format version %d; this library reads version %d", ErrUnsupported, v, stateVersion)
		}
		if v >= 1 {
			return h, fmt.Errorf("%w: saved state format version %d is from an older library; this library reads version %d: save the state again", ErrUnsupported, v, stateVersion)
		}
		return h, fmt.Errorf("%w: saved state format version %d is not a version", ErrBadFile, v)
	}
	if hs := le.Uint32(data[12:]); hs != stateHeaderSize {
		return h, fmt.Errorf("%w: saved state header size %d, want %d", ErrBadFile, hs, stateHeaderSize)
	}
	copy(h.fingerprint[:], data[16:48])
	h.arch = string(bytes.TrimRight(data[48:80], "\x00"))
	h.layers = le.Uint32(data[80:])
	h.kvDim = le.Uint32(data[84:])
	h.vocab = le.Uint32(data[88:])
	h.kvType = le.Uint32(data[92:])
	h.numerics = le.Uint32(data[96:])
	h.flags = le.Uint32(data[100:])
	h.nCtx = le.Uint64(data[104:])
	h.nPos = le.Uint64(data[112:])
	h.payload = le.Uint64(data[120:])
	h.kvLayers = le.Uint32(data[128:])
	h.recLayers = le.Uint32(data[132:])
	h.recFloats = le.Uint64(data[136:])
	if t := gguf.Type(h.kvType); t != gguf.F32 && t != gguf.F16 && t != gguf.Q8_0 {
		return h, fmt.Errorf("%w: saved state KV type %d (want 0 f32, 1 f16 or 8 q8_0)", ErrBadFile, h.kvType)
	}
	want := payloadBytes(h)
	if want == 0 && h.nPos != 0 || h.payload != want {
		return h, fmt.Errorf("%w: saved state header announces %d payload bytes for %d positions x %d layers x %d values", ErrBadFile, h.payload, h.nPos, h.layers, h.kvDim)
	}
	if got := uint64(len(data)) - stateHeaderSize - 4; got != want {
		if got < want {
			return h, fmt.Errorf("%w: saved state is truncated: %d payload bytes, the header announces %d", ErrBadFile, got, want)
		}
		return h, fmt.Errorf("%w: saved state has %d bytes after its end", ErrBadFile, got-want)
	}
	end := len(data) - 4
	if sum, got := le.Uint32(data[end:]), crc32.Checksum(data[:end], crcTable); sum != got {
		return h, fmt.Errorf("%w: saved state is corrupted: checksum %08x, computed %08x", ErrBadFile, sum, got)
	}
	if h.flags != 0 || !allZero(data[144:stateHeaderSize]) {
		return h, fmt.Errorf("%w: saved state uses flags %#x or reserved header bytes this library does not know", ErrUnsupported, h.flags)
	}
	return h, nil
}

func allZero(b []byte) bool {
	for _, x := range b {
		if x != 0 {
			return false
		}
	}
	return true
}

// compatible says why a well-formed saved state h cannot be loaded into s.
func (s *Session) compatible(h stateHeader) error {
	own := s.header()
	if h.fingerprint != own.fingerprint || h.layers != own.layers || h.kvDim != own.kvDim || h.vocab != own.vocab ||
		h.kvLayers != own.kvLayers || h.recLayers != own.recLayers || h.recFloats != own.recFloats {
		return fmt.Errorf("%w: the saved state belongs to another model (%s, %d layers, KV width %d, vocabulary %d; this one: %s, %d, %d, %d; fingerprints %x.., %x..)",
			ErrInvalidArgument, h.arch, h.layers, h.kvDim, h.vocab, own.arch, own.layers, own.kvDim, own.vocab, h.fingerprint[:6], own.fingerprint[:6])
	}
	if h.kvType != own.kvType {
		return fmt.Errorf("%w: the saved state has a %s KV cache; this session's is %s", ErrInvalidArgument, kvTypeName(h.kvType), kvTypeName(own.kvType))
	}
	if h.numerics != own.numerics {
		return fmt.Errorf("%w: the saved state was computed with numerics %v; this model uses %v", ErrInvalidArgument, Numerics(h.numerics), Numerics(own.numerics))
	}
	if h.nPos > uint64(s.nCtx) {
		return fmt.Errorf("%w: the saved state holds %d positions; this session's context is %d", ErrContextFull, h.nPos, s.nCtx)
	}
	return nil
}

func kvTypeName(t uint32) string { return gguf.Type(t).String() }

// LoadState replaces the session's positions with a saved state's. The
// state must come from a session of the same model file, KV type and
// numerics, and fit in this session's context (its own context size may
// differ). A malformed state is ErrBadFile (ErrUnsupported for a newer
// format), one for another model or session kind ErrInvalidArgument; on
// any error the session is unchanged (but for a state file that shrinks
// while it is read, which empties it). The counters restart: Stats
// afterwards counts from the restored state.
func (s *Session) LoadState(data []byte) (err error) {
	if err := s.enter("load state"); err != nil {
		return err
	}
	defer s.leave()
	return s.loadState(data)
}

func (s *Session) loadState(data []byte) (err error) {
	// data may be a mapped file that shrinks while we read it.
	// A fault after the copy began leaves the cache half written: the
	// session is then emptied rather than left holding mixed positions.
	old := debug.SetPanicOnFault(true)
	copying := false
	defer func() {
		debug.SetPanicOnFault(old)
		if r := recover(); r != nil {
			err = fmt.Errorf("engine: load state: %w: reading the state: %v", ErrIO, r)
			if copying {
				s.setPos(0)
				s.stats = SessionStats{}
			}
		}
	}()
	if !hostLittleEndian {
		return fmt.Errorf("engine: load state: %w: the state format is little-endian", ErrUnsupported)
	}
	h, err := parseState(data)
	if err != nil {
		return fmt.Errorf("engine: load state: %w", err)
	}
	if err := s.compatible(h); err != nil {
		return fmt.Errorf("engine: load state: %w", err)
	}
	n := int(h.nPos)
	p := data[stateHeaderSize:]
	le := binary.LittleEndian
	for i := 0; i < n; i++ {
		if t := le.Uint32(p[4*i:]); t >= h.vocab {
			return fmt.Errorf("engine: load state: %w: token %d at position %d is outside the vocabulary of %d", ErrBadFile, int32(t), i, h.vocab)
		}
	}
	if err := s.cache.ensure(n, s.pos); err != nil {
		return fmt.Errorf("engine: load state: %w", err)
	}
	s.fitScratch()
	copying = true
	s.hist = s.hist[:n]
	for i := range n {
		s.hist[i] = int32(le.Uint32(p[4*i:]))
	}
	p = p[4*n:]
	for il := 0; il < s.cache.nLayer; il++ {
		if !s.c.Recurrent(il) {
			s.cache.layerChunks(il, n, func(b []byte) { p = p[copy(b, p):] })
		}
	}
	if r := s.rec; r != nil {
		p = p[copy(unsafe.Slice((*byte)(unsafe.Pointer(&r.state[0])), 4*len(r.state)), p):]
		// The checkpoints were of other positions; the loaded one is one.
		r.dropAfter(0)
		r.snapshot(n)
	}
	s.pos = n
	s.stats = SessionStats{}
	return nil
}

// LoadStateFile is LoadState from a file written by SaveStateFile (or
// SaveState's bytes). The file is mapped, not read into memory, and its
// size is checked against its header before anything else.
func (s *Session) LoadStateFile(path string) error {
	if err := s.enter("load state"); err != nil {
		return err
	}
	defer s.leave()
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("engine: load state: %w: %w", ErrIO, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("engine: load state: %w: %w", ErrIO, err)
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("engine: load state %s: %w: not a regular file", path, ErrIO)
	}
	size := st.Size()
	if size < stateHeaderSize+4 || size > 1<<46 {
		return fmt.Errorf("engine: load state %s: %w: %d bytes is not the size of a saved state", path, ErrBadFile, size)
	}
	data, err := mapFilePrivate(f, int(size))
	if err != nil {
		return fmt.Errorf("engine: load state %s: %w: map: %w", path, ErrIO, err)
	}
	defer unmap(data)
	if err := s.loadState(data); err != nil {
		return fmt.Errorf("%w (file %s)", err, path)
	}
	return nil
}
