package gguf

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"reflect"
)

// Writer builds a GGUF file: metadata in insertion order, then the tensor
// table, then the tensor data, each tensor aligned. Tensor data is not
// copied: it must stay unchanged until WriteTo returns.
type Writer struct {
	// Version is the GGUF version written: 3 (the default) or 2; the two
	// differ only in that version 3 allows big-endian files.
	Version uint32

	alignment int64
	kvs       []wkv
	keyIdx    map[string]int
	tensors   []wtensor
	tensIdx   map[string]bool
}

type wkv struct {
	key     string
	typ     ValueType
	payload []byte
}

type wtensor struct {
	name  string
	typ   Type
	shape []int64
	data  []byte
}

// NewWriter returns an empty Writer (version 3, alignment 32).
func NewWriter() *Writer {
	return &Writer{Version: 3, alignment: DefaultAlignment, keyIdx: map[string]int{}, tensIdx: map[string]bool{}}
}

// Nested groups arrays into an array of arrays for Set:
// w.Set("k", gguf.Nested([]int32{1, 2}, []string{"a"})). The inner arrays
// may have different element types.
func Nested(arrays ...any) []any { return arrays }

// Set sets metadata key to v. Setting a key again replaces its value and
// keeps its position. Accepted types: uint8, int8, uint16, int16, uint32,
// int32, uint64, int64, float32, float64, bool, string; slices of those
// (an array); []any or [][]T of slices (an array of arrays, see Nested); and
// a Value or Array read from another File (copied as encoded). Plain int and
// uint are refused: GGUF readers expect a definite width.
// Setting KeyAlignment also sets the data alignment.
func (w *Writer) Set(key string, v any) error {
	var typ ValueType
	var payload []byte
	var err error
	switch x := v.(type) {
	case Value:
		raw, rerr := x.bytes()
		if rerr != nil {
			return fmt.Errorf("gguf: set %q: %w", key, rerr)
		}
		typ, payload = x.typ, append([]byte(nil), raw...)
	case Array:
		d := x.f.bytes()
		if d == nil {
			return fmt.Errorf("gguf: set %q: %w", key, ErrClosed)
		}
		typ, payload = ValueArray, append([]byte(nil), d[x.off-12:x.end]...)
	default:
		typ, payload, err = encodeValue(nil, reflect.ValueOf(v))
		if err != nil {
			return fmt.Errorf("gguf: set %q: %w", key, err)
		}
	}
	if key == KeyAlignment {
		a, ok := alignmentOf(typ, payload)
		if !ok {
			return fmt.Errorf("gguf: set %q: alignment must be a positive integer power of two up to %d", key, maxAlignment)
		}
		w.alignment = a
	}
	if i, ok := w.keyIdx[key]; ok {
		w.kvs[i] = wkv{key, typ, payload}
		return nil
	}
	w.keyIdx[key] = len(w.kvs)
	w.kvs = append(w.kvs, wkv{key, typ, payload})
	return nil
}

func alignmentOf(typ ValueType, payload []byte) (int64, bool) {
	if !typ.isInt() {
		return 0, false
	}
	a, neg := decodeInt(typ, payload)
	if neg || a == 0 || a&(a-1) != 0 || a > maxAlignment {
		return 0, false
	}
	return int64(a), true
}

// SetAlignment sets the data alignment (a power of two) and records it under
// general.alignment as a u32, as llama.cpp expects.
func (w *Writer) SetAlignment(a int) error {
	if a <= 0 || a&(a-1) != 0 || a > maxAlignment {
		return fmt.Errorf("gguf: alignment %d is not a power of two in [1, %d]", a, maxAlignment)
	}
	return w.Set(KeyAlignment, uint32(a))
}

// scalarType maps a Go kind to its GGUF value type.
func scalarType(k reflect.Kind) (ValueType, bool) {
	switch k {
	case reflect.Uint8:
		return ValueUint8, true
	case reflect.Int8:
		return ValueInt8, true
	case reflect.Uint16:
		return ValueUint16, true
	case reflect.Int16:
		return ValueInt16, true
	case reflect.Uint32:
		return ValueUint32, true
	case reflect.Int32:
		return ValueInt32, true
	case reflect.Uint64:
		return ValueUint64, true
	case reflect.Int64:
		return ValueInt64, true
	case reflect.Float32:
		return ValueFloat32, true
	case reflect.Float64:
		return ValueFloat64, true
	case reflect.Bool:
		return ValueBool, true
	case reflect.String:
		return ValueString, true
	}
	return 0, false
}

// encodeValue appends v's payload to b and returns its type.
func encodeValue(b []byte, v reflect.Value) (ValueType, []byte, error) {
	if !v.IsValid() {
		return 0, nil, fmt.Errorf("nil value")
	}
	if v.Kind() == reflect.Interface {
		if v.IsNil() {
			return 0, nil, fmt.Errorf("nil value")
		}
		v = v.Elem()
	}
	if v.Type() == reflect.TypeFor[Array]() {
		a := v.Interface().(Array)
		d := a.f.bytes()
		if d == nil {
			return 0, nil, ErrClosed
		}
		return ValueArray, append(b, d[a.off-12:a.end]...), nil
	}
	if t, ok := scalarType(v.Kind()); ok {
		return t, appendScalar(b, t, v), nil
	}
	if v.Kind() != reflect.Slice && v.Kind() != reflect.Array {
		return 0, nil, fmt.Errorf("unsupported type %s", v.Type())
	}
	n := v.Len()
	ek := v.Type().Elem().Kind()
	if et, ok := scalarType(ek); ok {
		b = le.AppendUint32(b, uint32(et))
		b = le.AppendUint64(b, uint64(n))
		if et == ValueUint8 && v.Kind() == reflect.Slice {
			return ValueArray, append(b, v.Bytes()...), nil
		}
		for i := 0; i < n; i++ {
			b = appendScalar(b, et, v.Index(i))
		}
		return ValueArray, b, nil
	}
	if ek != reflect.Slice && ek != reflect.Array && ek != reflect.Interface && v.Type().Elem() != reflect.TypeFor[Array]() {
		return 0, nil, fmt.Errorf("unsupported element type %s", v.Type().Elem())
	}
	b = le.AppendUint32(b, uint32(ValueArray))
	b = le.AppendUint64(b, uint64(n))
	for i := 0; i < n; i++ {
		var t ValueType
		var err error
		t, b, err = encodeValue(b, v.Index(i))
		if err != nil {
			return 0, nil, fmt.Errorf("element %d: %w", i, err)
		}
		if t != ValueArray {
			return 0, nil, fmt.Errorf("element %d of an array of arrays is a %s", i, t)
		}
	}
	return ValueArray, b, nil
}

func appendScalar(b []byte, t ValueType, v reflect.Value) []byte {
	switch t {
	case ValueUint8, ValueUint16, ValueUint32, ValueUint64:
		u := v.Uint()
		switch t {
		case ValueUint8:
			return append(b, byte(u))
		case ValueUint16:
			return le.AppendUint16(b, uint16(u))
		case ValueUint32:
			return le.AppendUint32(b, uint32(u))
		}
		return le.AppendUint64(b, u)
	case ValueInt8, ValueInt16, ValueInt32, ValueInt64:
		s := v.Int()
		switch t {
		case ValueInt8:
			return append(b, byte(s))
		case ValueInt16:
			return le.AppendUint16(b, uint16(s))
		case ValueInt32:
			return le.AppendUint32(b, uint32(s))
		}
		return le.AppendUint64(b, uint64(s))
	case ValueFloat32:
		return le.AppendUint32(b, math.Float32bits(float32(v.Float())))
	case ValueFloat64:
		return le.AppendUint64(b, math.Float64bits(v.Float()))
	case ValueBool:
		if v.Bool() {
			return append(b, 1)
		}
		return append(b, 0)
	case ValueString:
		s := v.String()
		b = le.AppendUint64(b, uint64(len(s)))
		return append(b, s...)
	}
	panic("unreachable")
}

// AddTensor adds a tensor. shape is in ggml order (shape[0] is the row
// length, a multiple of typ's block size); data must hold exactly the bytes
// the shape needs and is referenced, not copied.
func (w *Writer) AddTensor(name string, typ Type, shape []int64, data []byte) error {
	if w.tensIdx[name] {
		return fmt.Errorf("gguf: add tensor %q: duplicate name", name)
	}
	if !typ.Valid() {
		return fmt.Errorf("gguf: add tensor %q: unknown type %d: %w", name, uint32(typ), ErrUnsupported)
	}
	if len(shape) == 0 || len(shape) > MaxDims {
		return fmt.Errorf("gguf: add tensor %q: %d dimensions, want 1 to %d", name, len(shape), MaxDims)
	}
	rows := int64(1)
	for i, d := range shape {
		if d <= 0 {
			return fmt.Errorf("gguf: add tensor %q: dimension %d is %d, must be positive", name, i, d)
		}
		if i > 0 {
			if rows > math.MaxInt64/d {
				return fmt.Errorf("gguf: add tensor %q: shape %v overflows", name, shape)
			}
			rows *= d
		}
	}
	rb, err := typ.RowBytes(shape[0])
	if err != nil {
		return fmt.Errorf("gguf: add tensor %q: %w", name, err)
	}
	if rb > math.MaxInt64/rows {
		return fmt.Errorf("gguf: add tensor %q: shape %v overflows", name, shape)
	}
	if want := rb * rows; int64(len(data)) != want {
		return fmt.Errorf("gguf: add tensor %q: %s%v needs %d bytes, got %d", name, typ, shape, want, len(data))
	}
	w.tensIdx[name] = true
	w.tensors = append(w.tensors, wtensor{name, typ, append([]int64(nil), shape...), data})
	return nil
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// WriteTo writes the file to out and returns the bytes written.
func (w *Writer) WriteTo(out io.Writer) (int64, error) {
	if w.Version != 2 && w.Version != 3 {
		return 0, fmt.Errorf("gguf: write: version %d: %w", w.Version, ErrUnsupported)
	}
	cw := &countWriter{w: out}
	bw := bufio.NewWriterSize(cw, 64<<10)
	var hdr []byte
	hdr = append(hdr, magic...)
	hdr = le.AppendUint32(hdr, w.Version)
	hdr = le.AppendUint64(hdr, uint64(len(w.tensors)))
	hdr = le.AppendUint64(hdr, uint64(len(w.kvs)))
	for _, kv := range w.kvs {
		hdr = le.AppendUint64(hdr, uint64(len(kv.key)))
		hdr = append(hdr, kv.key...)
		hdr = le.AppendUint32(hdr, uint32(kv.typ))
		hdr = append(hdr, kv.payload...)
	}
	align := w.alignment
	pad := func(n int64) int64 { return (n + align - 1) &^ (align - 1) }
	rel := int64(0)
	for _, t := range w.tensors {
		hdr = le.AppendUint64(hdr, uint64(len(t.name)))
		hdr = append(hdr, t.name...)
		hdr = le.AppendUint32(hdr, uint32(len(t.shape)))
		for _, d := range t.shape {
			hdr = le.AppendUint64(hdr, uint64(d))
		}
		hdr = le.AppendUint32(hdr, uint32(t.typ))
		hdr = le.AppendUint64(hdr, uint64(rel))
		rel = pad(rel + int64(len(t.data)))
	}
	if len(w.tensors) > 0 {
		hdr = append(hdr, make([]byte, pad(int64(len(hdr)))-int64(len(hdr)))...)
	}
	if _, err := bw.Write(hdr); err != nil {
		return cw.n, fmt.Errorf("gguf: write header: %w", err)
	}
	var zeros [256]byte
	for _, t := range w.tensors {
		if _, err := bw.Write(t.data); err != nil {
			return cw.n, fmt.Errorf("gguf: write tensor %q: %w", t.name, err)
		}
		for p := pad(int64(len(t.data))) - int64(len(t.data)); p > 0; {
			k := min(p, int64(len(zeros)))
			if _, err := bw.Write(zeros[:k]); err != nil {
				return cw.n, fmt.Errorf("gguf: write tensor %q padding: %w", t.name, err)
			}
			p -= k
		}
	}
	if err := bw.Flush(); err != nil {
		return cw.n, fmt.Errorf("gguf: write: %w", err)
	}
	return cw.n, nil
}
