// Package gguf reads and writes GGUF files, the model format of ggml and
// llama.cpp (versions 2 and 3, little-endian).
//
// The reader maps the file read-only and never copies tensor data: a
// Tensor's Data is a view into the mapping. Metadata is validated in place
// at open (types, counts, every string length) and decoded on demand, so
// opening a file with a 150,000-entry vocabulary costs a walk over the
// lengths and a handful of allocations. Every structural problem is
// reported as an error wrapping ErrFormat (malformed) or ErrUnsupported
// (valid but not handled), with the key or tensor and the byte offset.
package gguf

import (
	"fmt"
	"math"
	"math/bits"
	"sort"
	"strings"
	"sync"
	"unicode/utf8"
)

const (
	// DefaultAlignment is the data alignment when general.alignment is absent.
	DefaultAlignment = 32
	// MaxDims is the most dimensions a tensor can have (GGML_MAX_DIMS).
	MaxDims = 4
	// MaxKeys and MaxTensors bound a file's metadata keys and tensors; a
	// file with more is ErrUnsupported.
	MaxKeys    = 1 << 16
	MaxTensors = 1 << 16
	// KeyAlignment is the metadata key that sets the data alignment.
	KeyAlignment = "general.alignment"

	magic        = "GGUF"
	maxNesting   = 16      // deepest array-of-array nesting accepted
	maxAlignment = 1 << 30 // larger alignments are refused as unsupported
)

// File is an open GGUF file. Its metadata and tensors are views into the
// file's bytes: after Close, Values and Arrays return ErrClosed and Tensor
// Data slices must not be used (for a mapped file, touching them faults).
type File struct {
	Version    uint32 // 2 or 3
	Alignment  int64  // data alignment (general.alignment or 32)
	DataOffset int64  // absolute offset of the tensor data section

	data    []byte
	release func([]byte) error // unmaps data; nil for Parse

	kvs     []kv
	keys    []string
	keyIdx  map[string]int32
	tensors []*Tensor
	tensIdx map[string]*Tensor

	mu      sync.Mutex
	arrIdx  map[int64]*offIndex
	closeMu sync.Once
}

type kv struct {
	typ      ValueType
	off, end int64 // value payload
	keyOff   int64 // key bytes
}

// Tensor describes one tensor of the file.
type Tensor struct {
	Name   string
	Type   Type
	Shape  []int64 // ggml order: Shape[0] is the contiguous row length
	Offset int64   // absolute byte offset in the file
	Data   []byte  // view into the file; invalid after File.Close
}

// NumElements returns the product of the dimensions.
func (t *Tensor) NumElements() int64 {
	n := int64(1)
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

// Rows returns the number of rows: the product of Shape[1:].
func (t *Tensor) Rows() int64 {
	n := int64(1)
	for _, d := range t.Shape[1:] {
		n *= d
	}
	return n
}

// Size returns the tensor's data size in bytes.
func (t *Tensor) Size() int64 { return int64(len(t.Data)) }

// Keys returns the metadata keys in file order. The slice is shared: do not
// modify it.
func (f *File) Keys() []string { return f.keys }

// Lookup returns the metadata value of key.
func (f *File) Lookup(key string) (Value, bool) {
	i, ok := f.keyIdx[key]
	if !ok {
		return Value{}, false
	}
	kv := &f.kvs[i]
	return Value{f: f, typ: kv.typ, off: kv.off, end: kv.end}, true
}

// KeyOffset returns the byte offset of key's entry in the file, for error
// messages; -1 if absent.
func (f *File) KeyOffset(key string) int64 {
	i, ok := f.keyIdx[key]
	if !ok {
		return -1
	}
	return f.kvs[i].keyOff - 8
}

// Tensors returns the tensors in file order. The slice is shared: do not
// modify it.
func (f *File) Tensors() []*Tensor { return f.tensors }

// Tensor returns the tensor called name.
func (f *File) Tensor(name string) (*Tensor, bool) {
	t, ok := f.tensIdx[name]
	return t, ok
}

// Size returns the size of the file in bytes.
func (f *File) Size() int64 { return int64(len(f.data)) }

// Close releases the file (unmaps it). Views into it are invalid afterwards.
// Calling Close more than once is harmless.
func (f *File) Close() error {
	var err error
	f.closeMu.Do(func() {
		d := f.data
		f.data = nil
		if f.release != nil && d != nil {
			err = f.release(d)
		}
	})
	return err
}

func (f *File) bytes() []byte {
	if f == nil {
		return nil
	}
	return f.data
}

// offsetIndex returns the shared, lazily built element index of the array
// whose first element is at off.
func (f *File) offsetIndex(off int64) *offIndex {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.arrIdx == nil {
		f.arrIdx = make(map[int64]*offIndex)
	}
	ix := f.arrIdx[off]
	if ix == nil {
		ix = new(offIndex)
		f.arrIdx[off] = ix
	}
	return ix
}

// Parse reads a GGUF file held in memory. The File's tensors and values
// alias data, which must not change while the File is used.
func Parse(data []byte) (*File, error) {
	return parse(data)
}

// parser reads little-endian fields with bounds checks; errors carry the
// offset and no context (the caller adds it).
type parser struct {
	data []byte
	off  int64
}

func (p *parser) remaining() int64 { return int64(len(p.data)) - p.off }

func (p *parser) errf(off int64, format string, args ...any) *FormatError {
	return &FormatError{Off: off, Msg: fmt.Sprintf(format, args...)}
}

// need checks that n more bytes remain for what+suffix (two parts so that
// callers need not concatenate on the happy path).
func (p *parser) need(n int64, what, suffix string) error {
	if n > p.remaining() {
		return p.errf(p.off, "%s%s: need %d bytes, only %d left (file size %d)", what, suffix, n, p.remaining(), len(p.data))
	}
	return nil
}

func (p *parser) u32(what string) (uint32, error) {
	if err := p.need(4, what, ""); err != nil {
		return 0, err
	}
	v := le.Uint32(p.data[p.off:])
	p.off += 4
	return v, nil
}

func (p *parser) u64(what string) (uint64, error) {
	if err := p.need(8, what, ""); err != nil {
		return 0, err
	}
	v := le.Uint64(p.data[p.off:])
	p.off += 8
	return v, nil
}

// str reads a length-prefixed string and returns the offset of its bytes
// and its length.
func (p *parser) str(what string) (int64, int64, error) {
	lenOff := p.off
	if err := p.need(8, what, " length"); err != nil {
		return 0, 0, err
	}
	n := le.Uint64(p.data[p.off:])
	p.off += 8
	if n > uint64(p.remaining()) {
		return 0, 0, p.errf(lenOff, "%s length %d past end of file (%d bytes left)", what, n, p.remaining())
	}
	off := p.off
	p.off += int64(n)
	return off, int64(n), nil
}

// skipValue validates one value of type t in place and moves past it. It
// allocates nothing; counts are bounded by the remaining bytes before use,
// so the walk is linear in the file size.
func (p *parser) skipValue(t ValueType, depth int) error {
	switch {
	case t == ValueString:
		_, _, err := p.str("string")
		return err
	case t == ValueArray:
		if depth >= maxNesting {
			return p.errf(p.off, "arrays nested deeper than %d", maxNesting)
		}
		at := p.off
		et, err := p.u32("array element type")
		if err != nil {
			return err
		}
		if !ValueType(et).Valid() {
			return p.errf(at, "unknown array element type %d", et)
		}
		elem := ValueType(et)
		n, err := p.u64("array count")
		if err != nil {
			return err
		}
		if n > uint64(p.remaining()/elem.minSize()) {
			return p.errf(at+4, "array of %d %s elements cannot fit in the %d bytes left", n, elem, p.remaining())
		}
		if sz := elem.Size(); sz != 0 {
			p.off += int64(n) * int64(sz)
			return nil
		}
		if elem == ValueString {
			off, i := walkStrings(p.data, int(p.off), int(n))
			p.off = int64(off)
			if i < int(n) {
				if p.remaining() < 8 {
					return p.errf(p.off, "string %d of %d: length truncated", i, n)
				}
				return p.errf(p.off, "string %d of %d: length %d past end of file (%d bytes left)", i, n, le.Uint64(p.data[p.off:]), p.remaining()-8)
			}
			return nil
		}
		for i := uint64(0); i < n; i++ {
			if err := p.skipValue(elem, depth+1); err != nil {
				return err
			}
		}
		return nil
	case t.Valid():
		if err := p.need(int64(t.Size()), t.String(), " value"); err != nil {
			return err
		}
		p.off += int64(t.Size())
		return nil
	}
	return p.errf(p.off-4, "unknown value type %d", uint32(t))
}

// walkStrings skips n length-prefixed strings starting at off: the hot path
// of opening a vocabulary, so it only reads lengths. It returns the offset
// reached and how many strings were whole (n on success).
func walkStrings(d []byte, off, n int) (int, int) {
	for i := 0; i < n; i++ {
		if off < 0 || off > len(d)-8 {
			return off, i
		}
		l := le.Uint64(d[off : off+8])
		if l > uint64(len(d)-off-8) {
			return off, i
		}
		off += 8 + int(l)
	}
	return off, n
}

func withContext(err error, format string, args ...any) error {
	if fe, ok := err.(*FormatError); ok && fe.Context == "" {
		fe.Context = fmt.Sprintf(format, args...)
	}
	return err
}

func parse(data []byte) (*File, error) {
	p := &parser{data: data}
	if len(data) < 4 {
		return nil, &FormatError{Context: "header", Off: 0, Msg: fmt.Sprintf("file too short (%d bytes) for the magic", len(data))}
	}
	if string(data[:4]) != magic {
		return nil, &FormatError{Context: "header", Off: 0, Msg: fmt.Sprintf("not a GGUF file (magic %q, want %q)", data[:4], magic)}
	}
	p.off = 4
	version, err := p.u32("version")
	if err != nil {
		return nil, withContext(err, "header")
	}
	switch {
	case version == 2 || version == 3:
	case bits.ReverseBytes32(version) == 2 || bits.ReverseBytes32(version) == 3:
		return nil, &FormatError{Context: "header", Off: 4, Msg: "big-endian GGUF not supported", Unsupported: true}
	default:
		return nil, &FormatError{Context: "header", Off: 4, Msg: fmt.Sprintf("version %d not supported (want 2 or 3)", version), Unsupported: true}
	}
	nTensors, err := p.u64("tensor count")
	if err != nil {
		return nil, withContext(err, "header")
	}
	nKV, err := p.u64("metadata count")
	if err != nil {
		return nil, withContext(err, "header")
	}
	// A key-value pair takes at least 13 bytes (key length, type, a u8).
	if nKV > uint64(p.remaining()/13) {
		return nil, &FormatError{Context: "header", Off: 16, Msg: fmt.Sprintf("metadata count %d cannot fit in the %d bytes left", nKV, p.remaining())}
	}
	// A tensor entry takes at least 32 bytes (name length, n_dims, one
	// dimension, type, offset).
	if nTensors > uint64(p.remaining()/32) {
		return nil, &FormatError{Context: "header", Off: 8, Msg: fmt.Sprintf("tensor count %d cannot fit in the %d bytes left", nTensors, p.remaining())}
	}

	// The index of each key or tensor costs some 100 to 200 bytes, several
	// times its smallest encoding: bound the counts so that what a file
	// can make this package allocate stays a few MiB (real models have
	// tens of keys and at most some thousands of tensors).
	if nKV > MaxKeys {
		return nil, &FormatError{Context: "header", Off: 16, Msg: fmt.Sprintf("%d metadata keys, more than %d", nKV, MaxKeys), Unsupported: true}
	}
	if nTensors > MaxTensors {
		return nil, &FormatError{Context: "header", Off: 8, Msg: fmt.Sprintf("%d tensors, more than %d", nTensors, MaxTensors), Unsupported: true}
	}
	f := &File{Version: version, Alignment: DefaultAlignment, data: data}
	if err := f.parseMetadata(p, int(nKV)); err != nil {
		return nil, err
	}
	if err := f.parseTensors(p, int(nTensors)); err != nil {
		return nil, err
	}
	return f, nil
}

func (f *File) parseMetadata(p *parser, n int) error {
	f.kvs = make([]kv, n)
	keyBytes := 0
	for i := range f.kvs {
		entry := p.off
		koff, klen, err := p.str("key")
		if err != nil {
			return withContext(err, "metadata entry %d", i)
		}
		key := p.data[koff : koff+klen]
		if !utf8.Valid(key) {
			return &FormatError{Context: fmt.Sprintf("metadata entry %d", i), Off: entry, Msg: fmt.Sprintf("key %q is not valid UTF-8", key)}
		}
		t, err := p.u32("value type")
		if err != nil {
			return withContext(err, "key %q", key)
		}
		start := p.off
		if !ValueType(t).Valid() {
			return &FormatError{Context: fmt.Sprintf("key %q", key), Off: start - 4, Msg: fmt.Sprintf("unknown value type %d", t)}
		}
		if err := p.skipValue(ValueType(t), 0); err != nil {
			return withContext(err, "key %q", key)
		}
		f.kvs[i] = kv{typ: ValueType(t), off: start, end: p.off, keyOff: koff}
		keyBytes += int(klen)
	}

	// All keys share one allocation.
	var sb strings.Builder
	sb.Grow(keyBytes)
	for i := range f.kvs {
		kv := &f.kvs[i]
		klen := int64(le.Uint64(p.data[kv.keyOff-8:]))
		sb.Write(p.data[kv.keyOff : kv.keyOff+klen])
	}
	all := sb.String()
	f.keys = make([]string, n)
	f.keyIdx = make(map[string]int32, n)
	pos := 0
	for i := range f.kvs {
		kv := &f.kvs[i]
		klen := int(le.Uint64(p.data[kv.keyOff-8:]))
		k := all[pos : pos+klen]
		pos += klen
		f.keys[i] = k
		if j, dup := f.keyIdx[k]; dup {
			return &FormatError{Context: fmt.Sprintf("key %q", k), Off: kv.keyOff - 8, Msg: fmt.Sprintf("duplicate key (first at offset %d)", f.kvs[j].keyOff-8)}
		}
		f.keyIdx[k] = int32(i)
	}

	if v, ok := f.Lookup(KeyAlignment); ok {
		ctx := fmt.Sprintf("key %q", KeyAlignment)
		a, err := v.Uint64()
		if err != nil {
			return &FormatError{Context: ctx, Off: v.off, Msg: fmt.Sprintf("alignment must be a non-negative integer, have %s", v.typ)}
		}
		if a == 0 || a&(a-1) != 0 {
			return &FormatError{Context: ctx, Off: v.off, Msg: fmt.Sprintf("alignment %d is not a power of two", a)}
		}
		if a > maxAlignment {
			return &FormatError{Context: ctx, Off: v.off, Msg: fmt.Sprintf("alignment %d larger than %d", a, maxAlignment), Unsupported: true}
		}
		f.Alignment = int64(a)
	}
	return nil
}

// tensorContext names a tensor in a FormatError. It is one out-of-line
// function so the many error returns of parseTensors stay small.
//
//go:noinline
func tensorContext(name string) string { return fmt.Sprintf("tensor %q", name) }

func (f *File) parseTensors(p *parser, n int) error {
	type rawTensor struct {
		nameOff, nameLen, entry int64
		rel                     uint64
	}
	raw := make([]rawTensor, n)
	ts := make([]Tensor, n)
	shapes := make([]int64, 0, MaxDims*n)
	nameBytes := 0
	for i := range ts {
		entry := p.off
		noff, nlen, err := p.str("tensor name")
		if err != nil {
			return withContext(err, "tensor %d", i)
		}
		name := p.data[noff : noff+nlen]
		if !utf8.Valid(name) {
			return &FormatError{Context: fmt.Sprintf("tensor %d", i), Off: entry, Msg: fmt.Sprintf("name %q is not valid UTF-8", name)}
		}
		ctx := func() string { return tensorContext(string(name)) }
		dimsOff := p.off
		nd, err := p.u32("n_dims")
		if err != nil {
			return withContext(err, "%s", ctx())
		}
		if nd == 0 || nd > MaxDims {
			return &FormatError{Context: ctx(), Off: dimsOff, Msg: fmt.Sprintf("n_dims %d out of range [1,%d]", nd, MaxDims)}
		}
		start := len(shapes)
		for d := 0; d < int(nd); d++ {
			at := p.off
			v, err := p.u64("dimension")
			if err != nil {
				return withContext(err, "%s", ctx())
			}
			if int64(v) <= 0 {
				return &FormatError{Context: ctx(), Off: at, Msg: fmt.Sprintf("dimension %d is %d, must be positive", d, int64(v))}
			}
			shapes = append(shapes, int64(v))
		}
		typeOff := p.off
		typ, err := p.u32("type")
		if err != nil {
			return withContext(err, "%s", ctx())
		}
		if !Type(typ).Valid() {
			return &FormatError{Context: ctx(), Off: typeOff, Msg: fmt.Sprintf("unknown tensor type %d", typ), Unsupported: true}
		}
		rel, err := p.u64("data offset")
		if err != nil {
			return withContext(err, "%s", ctx())
		}
		ts[i] = Tensor{Type: Type(typ), Shape: shapes[start:len(shapes):len(shapes)]}
		raw[i] = rawTensor{nameOff: noff, nameLen: nlen, entry: entry, rel: rel}
		nameBytes += int(nlen)
	}

	// Data starts at the next multiple of the alignment after the table.
	end := p.off
	f.DataOffset = (end + f.Alignment - 1) &^ (f.Alignment - 1)
	size := int64(len(p.data))

	var sb strings.Builder
	sb.Grow(nameBytes)
	for i := range raw {
		sb.Write(p.data[raw[i].nameOff : raw[i].nameOff+raw[i].nameLen])
	}
	all := sb.String()
	pos := 0
	f.tensors = make([]*Tensor, n)
	f.tensIdx = make(map[string]*Tensor, n)
	for i := range ts {
		t := &ts[i]
		r := &raw[i]
		t.Name = all[pos : pos+int(r.nameLen)]
		pos += int(r.nameLen)
		ctx := func() string { return tensorContext(t.Name) }
		if prev, dup := f.tensIdx[t.Name]; dup {
			return &FormatError{Context: ctx(), Off: r.entry, Msg: fmt.Sprintf("duplicate tensor name (first at offset %d)", raw[prev.index(ts)].entry)}
		}
		f.tensIdx[t.Name] = t
		f.tensors[i] = t

		nel := int64(1)
		for _, d := range t.Shape {
			if nel > math.MaxInt64/d {
				return &FormatError{Context: ctx(), Off: r.entry, Msg: fmt.Sprintf("shape %v: element count overflows int64", t.Shape)}
			}
			nel *= d
		}
		if bs := int64(t.Type.BlockSize()); t.Shape[0]%bs != 0 {
			return &FormatError{Context: ctx(), Off: r.entry, Msg: fmt.Sprintf("row length %d not a multiple of the %s block size %d", t.Shape[0], t.Type, bs)}
		}
		rowBytes, err := t.Type.RowBytes(t.Shape[0])
		if err != nil {
			return &FormatError{Context: ctx(), Off: r.entry, Msg: fmt.Sprintf("shape %v: byte size overflows int64", t.Shape)}
		}
		rows := nel / t.Shape[0]
		if rowBytes != 0 && rows > math.MaxInt64/rowBytes {
			return &FormatError{Context: ctx(), Off: r.entry, Msg: fmt.Sprintf("shape %v: byte size overflows int64", t.Shape)}
		}
		nbytes := rowBytes * rows
		if r.rel%uint64(f.Alignment) != 0 {
			return &FormatError{Context: ctx(), Off: r.entry, Msg: fmt.Sprintf("data offset %d not a multiple of the alignment %d", r.rel, f.Alignment)}
		}
		if f.DataOffset > size || r.rel > uint64(size-f.DataOffset) {
			return &FormatError{Context: ctx(), Off: r.entry, Msg: fmt.Sprintf("data offset %d past end of file (size %d; data section at %d)", r.rel, size, f.DataOffset)}
		}
		if nbytes > size-f.DataOffset-int64(r.rel) {
			return &FormatError{Context: ctx(), Off: r.entry, Msg: fmt.Sprintf("data [%d, +%d) past end of file (size %d; data section at %d, relative offset %d)", f.DataOffset+int64(r.rel), nbytes, size, f.DataOffset, r.rel)}
		}
		t.Offset = f.DataOffset + int64(r.rel)
		t.Data = p.data[t.Offset : t.Offset+nbytes : t.Offset+nbytes]
	}

	// Tensors must not overlap: check neighbours in offset order.
	if n > 1 {
		// sort.Slice rather than slices.SortFunc: the library links
		// sort.Slice anyway, and a generic sort instantiated only for this
		// cost ~10 KB of libmoonlm.so. Ties go in file order.
		order := make([]int, n)
		for i := range order {
			order[i] = i
		}
		sort.Slice(order, func(i, j int) bool {
			a, b := &ts[order[i]], &ts[order[j]]
			return a.Offset < b.Offset || a.Offset == b.Offset && order[i] < order[j]
		})
		for i := 1; i < n; i++ {
			a, b := &ts[order[i-1]], &ts[order[i]]
			if b.Offset < a.Offset+int64(len(a.Data)) {
				return &FormatError{Context: fmt.Sprintf("tensor %q", b.Name), Off: raw[b.index(ts)].entry, Msg: fmt.Sprintf("data [%d, %d) overlaps tensor %q [%d, %d)", b.Offset, b.Offset+int64(len(b.Data)), a.Name, a.Offset, a.Offset+int64(len(a.Data)))}
			}
		}
	}
	return nil
}

// index returns t's position in ts (t must point into ts).
func (t *Tensor) index(ts []Tensor) int {
	for i := range ts {
		if &ts[i] == t {
			return i
		}
	}
	return 0
}
