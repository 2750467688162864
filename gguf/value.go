package gguf

import (
	"encoding/binary"
	"fmt"
	"math"
	"sync"
	"unicode/utf8"
)

// ValueType is the type of a metadata value, numbered as in the GGUF spec.
type ValueType uint32

// Metadata value types.
const (
	ValueUint8   ValueType = 0
	ValueInt8    ValueType = 1
	ValueUint16  ValueType = 2
	ValueInt16   ValueType = 3
	ValueUint32  ValueType = 4
	ValueInt32   ValueType = 5
	ValueFloat32 ValueType = 6
	ValueBool    ValueType = 7
	ValueString  ValueType = 8
	ValueArray   ValueType = 9
	ValueUint64  ValueType = 10
	ValueInt64   ValueType = 11
	ValueFloat64 ValueType = 12
)

var valueTypeNames = [...]string{
	"u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "str", "arr", "u64", "i64", "f64",
}

// valueSizes is the encoded size of each fixed-size value type (0 for string
// and array).
var valueSizes = [...]int64{1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8}

// String returns the short name used by ggml tools: "u8", "i32", "f32",
// "bool", "str", "arr", ...
func (t ValueType) String() string {
	if !t.Valid() {
		return fmt.Sprintf("valuetype(%d)", uint32(t))
	}
	return valueTypeNames[t]
}

// Valid reports whether t is a value type of the spec.
func (t ValueType) Valid() bool { return int(t) < len(valueTypeNames) }

// Size returns the encoded size of a fixed-size value type, or 0 for
// strings, arrays and unknown types.
func (t ValueType) Size() int {
	if !t.Valid() {
		return 0
	}
	return int(valueSizes[t])
}

// minSize is the fewest bytes an encoded value of type t can take: used to
// bound a claimed count by the bytes that remain.
func (t ValueType) minSize() int64 {
	switch t {
	case ValueString:
		return 8
	case ValueArray:
		return 12
	}
	return valueSizes[t]
}

func (t ValueType) isInt() bool {
	return t <= ValueInt32 || t == ValueUint64 || t == ValueInt64
}

var le = binary.LittleEndian

// Value is a metadata value. It refers to the file's bytes and decodes on
// demand; it is valid until the File is closed.
type Value struct {
	f   *File
	typ ValueType
	off int64 // payload start (for arrays: the element type field)
	end int64 // payload end
}

// Type returns the value's type.
func (v Value) Type() ValueType { return v.typ }

// Raw returns the value's encoded bytes (payload only, without the type
// field): a view into the file, valid until Close.
func (v Value) Raw() []byte {
	d := v.f.bytes()
	if d == nil || v.end > int64(len(d)) {
		return nil
	}
	return d[v.off:v.end]
}

func (v Value) bytes() ([]byte, error) {
	d := v.f.bytes()
	if d == nil {
		return nil, ErrClosed
	}
	if v.off < 0 || v.end > int64(len(d)) || v.off > v.end {
		return nil, fmt.Errorf("gguf: value at offset %d: out of bounds: %w", v.off, ErrFormat)
	}
	return d[v.off:v.end], nil
}

func (v Value) typeError(want string) error {
	return fmt.Errorf("gguf: value at offset %d is %s, not %s", v.off, v.typ, want)
}

// StringBytes returns a string value's bytes without UTF-8 validation: a
// view into the file, valid until Close.
func (v Value) StringBytes() ([]byte, error) {
	if v.typ != ValueString {
		return nil, v.typeError("a string")
	}
	b, err := v.bytes()
	if err != nil {
		return nil, err
	}
	return b[8:], nil
}

// String returns a string value, after checking that it is valid UTF-8.
func (v Value) String() (string, error) {
	b, err := v.StringBytes()
	if err != nil {
		return "", err
	}
	if !utf8.Valid(b) {
		return "", &FormatError{Off: v.off + 8, Msg: "string is not valid UTF-8"}
	}
	return string(b), nil
}

// Uint64 returns an integer value (of any integer type) that is not negative.
func (v Value) Uint64() (uint64, error) {
	if !v.typ.isInt() {
		return 0, v.typeError("an integer")
	}
	b, err := v.bytes()
	if err != nil {
		return 0, err
	}
	u, neg := decodeInt(v.typ, b)
	if neg {
		return 0, fmt.Errorf("gguf: value at offset %d: negative %d where an unsigned integer is needed", v.off, int64(u))
	}
	return u, nil
}

// Int64 returns an integer value (of any integer type) that fits an int64.
func (v Value) Int64() (int64, error) {
	if !v.typ.isInt() {
		return 0, v.typeError("an integer")
	}
	b, err := v.bytes()
	if err != nil {
		return 0, err
	}
	u, neg := decodeInt(v.typ, b)
	if !neg && u > math.MaxInt64 {
		return 0, fmt.Errorf("gguf: value at offset %d: %d overflows int64", v.off, u)
	}
	return int64(u), nil
}

// Float64 returns a float value, or an integer value converted to float64.
func (v Value) Float64() (float64, error) {
	b, err := v.bytes()
	if err != nil {
		return 0, err
	}
	switch {
	case v.typ == ValueFloat32:
		return float64(math.Float32frombits(le.Uint32(b))), nil
	case v.typ == ValueFloat64:
		return math.Float64frombits(le.Uint64(b)), nil
	case v.typ.isInt():
		u, neg := decodeInt(v.typ, b)
		if neg {
			return float64(int64(u)), nil
		}
		return float64(u), nil
	}
	return 0, v.typeError("a number")
}

// Bool returns a bool value; a byte other than 0 or 1 is an error.
func (v Value) Bool() (bool, error) {
	if v.typ != ValueBool {
		return false, v.typeError("a bool")
	}
	b, err := v.bytes()
	if err != nil {
		return false, err
	}
	switch b[0] {
	case 0:
		return false, nil
	case 1:
		return true, nil
	}
	return false, &FormatError{Off: v.off, Msg: fmt.Sprintf("bool byte is %d, not 0 or 1", b[0])}
}

// Array returns an array value.
func (v Value) Array() (Array, error) {
	if v.typ != ValueArray {
		return Array{}, v.typeError("an array")
	}
	b, err := v.bytes()
	if err != nil {
		return Array{}, err
	}
	if len(b) < 12 {
		return Array{}, &FormatError{Off: v.off, Msg: "array header truncated"}
	}
	a := Array{f: v.f, elem: ValueType(le.Uint32(b)), n: int(le.Uint64(b[4:])), off: v.off + 12, end: v.end}
	if a.elem == ValueString || a.elem == ValueArray {
		a.ix = v.f.offsetIndex(a.off)
	}
	return a, nil
}

// Interface decodes the value into a Go value: uint8, int8, uint16, int16,
// uint32, int32, float32, bool, string, uint64, int64, float64, or for an
// array a slice of those ([]string, []int32, ...) or []any of nested
// arrays. Writer.Set accepts every result.
func (v Value) Interface() (any, error) {
	if v.typ == ValueArray {
		a, err := v.Array()
		if err != nil {
			return nil, err
		}
		return a.Interface()
	}
	b, err := v.bytes()
	if err != nil {
		return nil, err
	}
	switch v.typ {
	case ValueUint8:
		return b[0], nil
	case ValueInt8:
		return int8(b[0]), nil
	case ValueUint16:
		return le.Uint16(b), nil
	case ValueInt16:
		return int16(le.Uint16(b)), nil
	case ValueUint32:
		return le.Uint32(b), nil
	case ValueInt32:
		return int32(le.Uint32(b)), nil
	case ValueFloat32:
		return math.Float32frombits(le.Uint32(b)), nil
	case ValueUint64:
		return le.Uint64(b), nil
	case ValueInt64:
		return int64(le.Uint64(b)), nil
	case ValueFloat64:
		return math.Float64frombits(le.Uint64(b)), nil
	case ValueBool:
		return v.Bool()
	case ValueString:
		return v.String()
	}
	return nil, v.typeError("a known type")
}

// decodeInt decodes an integer of type t from b: its magnitude bits as a
// uint64 (two's complement for negatives) and whether it is negative.
func decodeInt(t ValueType, b []byte) (uint64, bool) {
	var s int64
	switch t {
	case ValueUint8:
		return uint64(b[0]), false
	case ValueUint16:
		return uint64(le.Uint16(b)), false
	case ValueUint32:
		return uint64(le.Uint32(b)), false
	case ValueUint64:
		return le.Uint64(b), false
	case ValueInt8:
		s = int64(int8(b[0]))
	case ValueInt16:
		s = int64(int16(le.Uint16(b)))
	case ValueInt32:
		s = int64(int32(le.Uint32(b)))
	case ValueInt64:
		s = int64(le.Uint64(b))
	}
	return uint64(s), s < 0
}

// Array is a metadata array. It decodes elements on demand; for arrays of
// strings or arrays, the first access by index builds (once, shared by all
// copies) an index of element offsets. Valid until the File is closed; safe
// for concurrent use.
type Array struct {
	f    *File
	elem ValueType
	n    int
	off  int64 // first element
	end  int64
	ix   *offIndex
}

// offIndex holds the start offsets of the elements of a string or array
// array, plus the end offset.
type offIndex struct {
	once sync.Once
	offs []int64
	err  error
}

// ElemType returns the type of the elements.
func (a Array) ElemType() ValueType { return a.elem }

// Len returns the number of elements.
func (a Array) Len() int { return a.n }

// Raw returns the encoded elements of an array of fixed-size values (a view
// into the file, little-endian), or nil for strings and arrays.
func (a Array) Raw() []byte {
	if a.elem.Size() == 0 {
		return nil
	}
	d := a.f.bytes()
	if d == nil || a.end > int64(len(d)) {
		return nil
	}
	return d[a.off:a.end]
}

// Index returns element i as a Value.
func (a Array) Index(i int) (Value, error) {
	if i < 0 || i >= a.n {
		return Value{}, fmt.Errorf("gguf: array at offset %d: index %d out of range [0,%d)", a.off, i, a.n)
	}
	if sz := int64(a.elem.Size()); sz != 0 {
		p := a.off + int64(i)*sz
		return Value{f: a.f, typ: a.elem, off: p, end: p + sz}, nil
	}
	offs, err := a.offsets()
	if err != nil {
		return Value{}, err
	}
	return Value{f: a.f, typ: a.elem, off: offs[i], end: offs[i+1]}, nil
}

// offsets returns the element offsets of a string or array array, building
// them on first use.
func (a Array) offsets() ([]int64, error) {
	ix := a.ix
	if ix == nil {
		return nil, fmt.Errorf("gguf: array at offset %d of %s: %w", a.off, a.elem, ErrFormat)
	}
	ix.once.Do(func() { ix.offs, ix.err = a.buildIndex() })
	if ix.err != nil {
		return nil, ix.err
	}
	if len(ix.offs) != a.n+1 {
		return nil, &FormatError{Off: a.off, Msg: "arrays share an element offset"}
	}
	return ix.offs, nil
}

// buildIndex walks the elements' lengths (already validated at open, but
// checked again so that nothing can panic).
func (a Array) buildIndex() ([]int64, error) {
	d := a.f.bytes()
	if d == nil {
		return nil, ErrClosed
	}
	if a.end > int64(len(d)) {
		return nil, &FormatError{Off: a.off, Msg: "array past end of file"}
	}
	p := parser{data: d[:a.end], off: a.off}
	offs := make([]int64, a.n+1)
	for i := 0; i < a.n; i++ {
		offs[i] = p.off
		if err := p.skipValue(a.elem, 1); err != nil {
			return nil, err
		}
	}
	offs[a.n] = p.off
	return offs, nil
}

// StringBytes returns string element i without UTF-8 validation: a view into
// the file, valid until Close. For bulk use (tokenizer vocabularies).
func (a Array) StringBytes(i int) ([]byte, error) {
	if a.elem != ValueString {
		return nil, fmt.Errorf("gguf: array at offset %d has %s elements, not strings", a.off, a.elem)
	}
	if i < 0 || i >= a.n {
		return nil, fmt.Errorf("gguf: array at offset %d: index %d out of range [0,%d)", a.off, i, a.n)
	}
	offs, err := a.offsets()
	if err != nil {
		return nil, err
	}
	d := a.f.bytes()
	if d == nil {
		return nil, ErrClosed
	}
	p, q := offs[i]+8, offs[i+1]
	if p > q || q > int64(len(d)) {
		return nil, &FormatError{Off: offs[i], Msg: "string out of bounds"}
	}
	return d[p:q:q], nil
}

// String returns string element i, checked to be valid UTF-8.
func (a Array) String(i int) (string, error) {
	if a.elem != ValueString {
		return "", fmt.Errorf("gguf: array at offset %d has %s elements, not strings", a.off, a.elem)
	}
	v, err := a.Index(i)
	if err != nil {
		return "", err
	}
	return v.String()
}

// Uint64 returns integer element i (any integer type, not negative).
func (a Array) Uint64(i int) (uint64, error) {
	v, err := a.Index(i)
	if err != nil {
		return 0, err
	}
	return v.Uint64()
}

// Int64 returns integer element i (any integer type).
func (a Array) Int64(i int) (int64, error) {
	v, err := a.Index(i)
	if err != nil {
		return 0, err
	}
	return v.Int64()
}

// Float64 returns numeric element i as a float64.
func (a Array) Float64(i int) (float64, error) {
	v, err := a.Index(i)
	if err != nil {
		return 0, err
	}
	return v.Float64()
}

// Bool returns bool element i.
func (a Array) Bool(i int) (bool, error) {
	v, err := a.Index(i)
	if err != nil {
		return false, err
	}
	return v.Bool()
}

// Array returns array element i of an array of arrays.
func (a Array) Array(i int) (Array, error) {
	v, err := a.Index(i)
	if err != nil {
		return Array{}, err
	}
	return v.Array()
}

// Interface decodes the whole array into a typed slice ([]string, []int32,
// ..., []any for arrays of arrays).
func (a Array) Interface() (any, error) {
	switch a.elem {
	case ValueUint8:
		return decodeSlice(a, func(b []byte) uint8 { return b[0] })
	case ValueInt8:
		return decodeSlice(a, func(b []byte) int8 { return int8(b[0]) })
	case ValueUint16:
		return decodeSlice(a, func(b []byte) uint16 { return le.Uint16(b) })
	case ValueInt16:
		return decodeSlice(a, func(b []byte) int16 { return int16(le.Uint16(b)) })
	case ValueUint32:
		return decodeSlice(a, func(b []byte) uint32 { return le.Uint32(b) })
	case ValueInt32:
		return decodeSlice(a, func(b []byte) int32 { return int32(le.Uint32(b)) })
	case ValueFloat32:
		return decodeSlice(a, func(b []byte) float32 { return math.Float32frombits(le.Uint32(b)) })
	case ValueUint64:
		return decodeSlice(a, func(b []byte) uint64 { return le.Uint64(b) })
	case ValueInt64:
		return decodeSlice(a, func(b []byte) int64 { return int64(le.Uint64(b)) })
	case ValueFloat64:
		return decodeSlice(a, func(b []byte) float64 { return math.Float64frombits(le.Uint64(b)) })
	case ValueBool:
		out := make([]bool, a.n)
		for i := range out {
			b, err := a.Bool(i)
			if err != nil {
				return nil, err
			}
			out[i] = b
		}
		return out, nil
	case ValueString:
		out := make([]string, a.n)
		for i := range out {
			s, err := a.String(i)
			if err != nil {
				return nil, err
			}
			out[i] = s
		}
		return out, nil
	case ValueArray:
		out := make([]any, a.n)
		for i := range out {
			sub, err := a.Array(i)
			if err != nil {
				return nil, err
			}
			if out[i], err = sub.Interface(); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	return nil, fmt.Errorf("gguf: array at offset %d: unknown element type %d: %w", a.off, uint32(a.elem), ErrFormat)
}

func decodeSlice[T any](a Array, dec func([]byte) T) ([]T, error) {
	raw := a.Raw()
	sz := a.elem.Size()
	if raw == nil && a.n > 0 || len(raw) != a.n*sz {
		if a.f.bytes() == nil {
			return nil, ErrClosed
		}
		return nil, &FormatError{Off: a.off, Msg: "array elements out of bounds"}
	}
	out := make([]T, a.n)
	for i := range out {
		out[i] = dec(raw[i*sz:])
	}
	return out, nil
}

// ForEachString calls fn with each element of a string array in order: its
// raw bytes (a view into the file, no UTF-8 check). It walks the encoding
// once and builds no index, so it is the cheapest way to load a vocabulary.
// It stops at the first error fn returns and returns it.
func (a Array) ForEachString(fn func(i int, b []byte) error) error {
	if a.elem != ValueString {
		return fmt.Errorf("gguf: array at offset %d has %s elements, not strings", a.off, a.elem)
	}
	d := a.f.bytes()
	if d == nil {
		return ErrClosed
	}
	if a.end > int64(len(d)) {
		return &FormatError{Off: a.off, Msg: "array past end of file"}
	}
	d = d[:a.end]
	off := int(a.off)
	for i := 0; i < a.n; i++ {
		if off > len(d)-8 {
			return &FormatError{Off: int64(off), Msg: fmt.Sprintf("string %d of %d truncated", i, a.n)}
		}
		l := le.Uint64(d[off : off+8])
		if l > uint64(len(d)-off-8) {
			return &FormatError{Off: int64(off), Msg: fmt.Sprintf("string %d of %d past end of array", i, a.n)}
		}
		s := off + 8
		off = s + int(l)
		if err := fn(i, d[s:off:off]); err != nil {
			return err
		}
	}
	return nil
}
