package gguf

import (
	"fmt"
	"math"
)

// Type is a ggml tensor type, numbered as in ggml's enum ggml_type (ggml.h).
// Numbers that ggml retired (4, 5, 31-33, 36-38) are not valid types.
type Type uint32

// Tensor types, with ggml's numbering.
const (
	F32     Type = 0
	F16     Type = 1
	Q4_0    Type = 2
	Q4_1    Type = 3
	Q5_0    Type = 6
	Q5_1    Type = 7
	Q8_0    Type = 8
	Q8_1    Type = 9
	Q2_K    Type = 10
	Q3_K    Type = 11
	Q4_K    Type = 12
	Q5_K    Type = 13
	Q6_K    Type = 14
	Q8_K    Type = 15
	IQ2_XXS Type = 16
	IQ2_XS  Type = 17
	IQ3_XXS Type = 18
	IQ1_S   Type = 19
	IQ4_NL  Type = 20
	IQ3_S   Type = 21
	IQ2_S   Type = 22
	IQ4_XS  Type = 23
	I8      Type = 24
	I16     Type = 25
	I32     Type = 26
	I64     Type = 27
	F64     Type = 28
	IQ1_M   Type = 29
	BF16    Type = 30
	TQ1_0   Type = 34
	TQ2_0   Type = 35
	MXFP4   Type = 39
)

// Block geometry of the types with kernels (ggml's QK constants and block
// struct sizes). The traits table below is built from these, so they are
// its entries; the kernels index blocks with them as constants.
const (
	QK32 = 32  // values per block of Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1, IQ4_NL
	QKK  = 256 // values per block of the K-quants, Q8_K and IQ4_XS

	BytesQ4_0   = 18
	BytesQ4_1   = 20
	BytesQ5_0   = 22
	BytesQ5_1   = 24
	BytesQ8_0   = 34
	BytesMXFP4  = 1 + QK32/2 // an E8M0 scale and 32 E2M1 values
	BytesQ8_1   = 36
	BytesQ2_K   = 84
	BytesQ3_K   = 110
	BytesQ4_K   = 144
	BytesQ5_K   = 176
	BytesQ6_K   = 210
	BytesQ8_K   = 292
	BytesIQ4_NL = 18
	BytesIQ4_XS = 136
)

// typeTraits is what the reader needs to size a tensor: ggml's type name,
// the number of elements per block and the bytes per block (ggml's
// type_traits table; blck_size and type_size).
type typeTraits struct {
	name       string
	blockSize  int
	blockBytes int
}

var traits = [...]typeTraits{
	F32:     {"f32", 1, 4},
	F16:     {"f16", 1, 2},
	Q4_0:    {"q4_0", QK32, BytesQ4_0},
	Q4_1:    {"q4_1", QK32, BytesQ4_1},
	Q5_0:    {"q5_0", QK32, BytesQ5_0},
	Q5_1:    {"q5_1", QK32, BytesQ5_1},
	Q8_0:    {"q8_0", QK32, BytesQ8_0},
	Q8_1:    {"q8_1", QK32, BytesQ8_1}, // sizeof(block_q8_1): two f16 and 32 int8 (gguf-py says 40)
	Q2_K:    {"q2_K", QKK, BytesQ2_K},
	Q3_K:    {"q3_K", QKK, BytesQ3_K},
	Q4_K:    {"q4_K", QKK, BytesQ4_K},
	Q5_K:    {"q5_K", QKK, BytesQ5_K},
	Q6_K:    {"q6_K", QKK, BytesQ6_K},
	Q8_K:    {"q8_K", QKK, BytesQ8_K},
	IQ2_XXS: {"iq2_xxs", 256, 66},
	IQ2_XS:  {"iq2_xs", 256, 74},
	IQ3_XXS: {"iq3_xxs", 256, 98},
	IQ1_S:   {"iq1_s", 256, 50},
	IQ4_NL:  {"iq4_nl", QK32, BytesIQ4_NL},
	IQ3_S:   {"iq3_s", 256, 110},
	IQ2_S:   {"iq2_s", 256, 82},
	IQ4_XS:  {"iq4_xs", QKK, BytesIQ4_XS},
	I8:      {"i8", 1, 1},
	I16:     {"i16", 1, 2},
	I32:     {"i32", 1, 4},
	I64:     {"i64", 1, 8},
	F64:     {"f64", 1, 8},
	IQ1_M:   {"iq1_m", 256, 56},
	BF16:    {"bf16", 1, 2},
	TQ1_0:   {"tq1_0", 256, 54},
	TQ2_0:   {"tq2_0", 256, 66},
	MXFP4:   {"mxfp4", QK32, BytesMXFP4},
}

// Types returns every tensor type this package knows, in numeric order.
func Types() []Type {
	var ts []Type
	for i := range traits {
		if traits[i].blockSize != 0 {
			ts = append(ts, Type(i))
		}
	}
	return ts
}

// Valid reports whether t is a tensor type this package knows.
func (t Type) Valid() bool {
	return int(t) < len(traits) && traits[t].blockSize != 0
}

// String returns ggml's name for t ("f32", "q4_K", "iq4_xs"), or "type(N)"
// for a number it does not know.
func (t Type) String() string {
	if !t.Valid() {
		return fmt.Sprintf("type(%d)", uint32(t))
	}
	return traits[t].name
}

// ParseType returns the type named name (ggml's name, as String returns it;
// case-insensitive).
func ParseType(name string) (Type, bool) {
	for i := range traits {
		if traits[i].blockSize != 0 && equalFold(traits[i].name, name) {
			return Type(i), true
		}
	}
	return 0, false
}

func equalFold(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

// BlockSize returns the number of elements per block (1 for plain types such
// as F32), or 0 for an unknown type.
func (t Type) BlockSize() int {
	if !t.Valid() {
		return 0
	}
	return traits[t].blockSize
}

// BlockBytes returns the bytes per block, or 0 for an unknown type.
func (t Type) BlockBytes() int {
	if !t.Valid() {
		return 0
	}
	return traits[t].blockBytes
}

// Quantized reports whether t stores elements in multi-element blocks.
func (t Type) Quantized() bool { return t.BlockSize() > 1 }

// RowBytes returns the bytes that n elements of type t take. n must be a
// non-negative multiple of the block size; the result must fit in an int64.
func (t Type) RowBytes(n int64) (int64, error) {
	if !t.Valid() {
		return 0, fmt.Errorf("gguf: unknown tensor type %d: %w", uint32(t), ErrUnsupported)
	}
	bs, bb := int64(traits[t].blockSize), int64(traits[t].blockBytes)
	if n < 0 {
		return 0, fmt.Errorf("gguf: negative element count %d for type %s", n, t)
	}
	if n%bs != 0 {
		return 0, fmt.Errorf("gguf: %d elements is not a multiple of the %s block size %d", n, t, bs)
	}
	blocks := n / bs
	if blocks > math.MaxInt64/bb {
		return 0, fmt.Errorf("gguf: %d elements of type %s overflow int64 bytes", n, t)
	}
	return blocks * bb, nil
}
