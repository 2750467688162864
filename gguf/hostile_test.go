package gguf

import (
	"encoding/binary"
	"errors"
	"math"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// crafter assembles GGUF bytes field by field, so that each hostile case
// states exactly what it lies about.
type crafter struct{ b []byte }

func (c *crafter) raw(s string) *crafter { c.b = append(c.b, s...); return c }
func (c *crafter) u8(v uint8) *crafter   { c.b = append(c.b, v); return c }
func (c *crafter) u32(v uint32) *crafter { c.b = binary.LittleEndian.AppendUint32(c.b, v); return c }
func (c *crafter) u64(v uint64) *crafter { c.b = binary.LittleEndian.AppendUint64(c.b, v); return c }
func (c *crafter) str(s string) *crafter { return c.u64(uint64(len(s))).raw(s) }
func (c *crafter) zeros(n int) *crafter  { c.b = append(c.b, make([]byte, n)...); return c }

func header(version uint32, nTensors, nKV uint64) *crafter {
	return new(crafter).raw("GGUF").u32(version).u64(nTensors).u64(nKV)
}

// kvU32 adds a u32 metadata entry.
func (c *crafter) kvU32(key string, v uint32) *crafter {
	return c.str(key).u32(uint32(ValueUint32)).u32(v)
}

// tensor adds a tensor table entry.
func (c *crafter) tensor(name string, typ Type, off uint64, dims ...uint64) *crafter {
	c.str(name).u32(uint32(len(dims)))
	for _, d := range dims {
		c.u64(d)
	}
	return c.u32(uint32(typ)).u64(off)
}

// padTo pads with zeros to a multiple of a.
func (c *crafter) padTo(a int) *crafter {
	for len(c.b)%a != 0 {
		c.b = append(c.b, 0)
	}
	return c
}

type hostileCase struct {
	name        string
	data        []byte
	unsupported bool
	want        []string // substrings of the error message
}

// hostileCases returns one crafted file per class of bad input.
func hostileCases() []hostileCase {
	oneF32 := func(c *crafter) []byte { return c.padTo(32).zeros(64).b } // 16 f32 of data
	return []hostileCase{
		{"empty", nil, false, []string{"too short"}},
		{"magic only", []byte("GGUF"), false, []string{"header", "version", "offset 4"}},
		{"bad magic", new(crafter).raw("GGML").u32(3).u64(0).u64(0).b, false, []string{"not a GGUF file (magic", "offset 0"}},
		{"version 1", header(1, 0, 0).b, true, []string{"version 1"}},
		{"version 4", header(4, 0, 0).b, true, []string{"version 4"}},
		{"big-endian", new(crafter).raw("GGUF").u32(3 << 24).zeros(16).b, true, []string{"big-endian"}},
		{"truncated counts", header(3, 0, 0).b[:20], false, []string{"metadata count", "offset 16"}},
		{"absurd kv count", header(3, 0, 1<<63).zeros(64).b, false, []string{"metadata count 9223372036854775808"}},
		{"absurd tensor count", header(3, 1<<62, 0).zeros(64).b, false, []string{"tensor count"}},
		{"key length past end", header(3, 0, 1).u64(1 << 40).raw("general.name").zeros(8).b, false, []string{"metadata entry 0", "key length 1099511627776 past end", "offset 24"}},
		{"key not utf-8", header(3, 0, 1).str("a\xffb").u32(uint32(ValueUint8)).u8(1).b, false, []string{"not valid UTF-8"}},
		{"unknown value type", header(3, 0, 1).str("k").u32(13).u64(0).b, false, []string{`key "k"`, "unknown value type 13"}},
		{"truncated value", header(3, 0, 1).str("k.u64").u32(uint32(ValueUint64)).u32(0).b, false, []string{`key "k.u64"`, "u64 value"}},
		{"string length past end", header(3, 0, 1).str("k.s").u32(uint32(ValueString)).u64(1 << 62).raw("abc").b, false, []string{`key "k.s"`, "string length 4611686018427387904 past end"}},
		{"absurd string array count", header(3, 0, 1).str("tokenizer.ggml.tokens").u32(uint32(ValueArray)).u32(uint32(ValueString)).u64(1 << 63).str("a").str("b").b, false, []string{`key "tokenizer.ggml.tokens"`, "array of 9223372036854775808 str elements cannot fit"}},
		{"absurd u8 array count", header(3, 0, 1).str("k").u32(uint32(ValueArray)).u32(uint32(ValueUint8)).u64(math.MaxUint64).zeros(10).b, false, []string{`key "k"`, "cannot fit"}},
		{"string in array past end", header(3, 0, 1).str("k").u32(uint32(ValueArray)).u32(uint32(ValueString)).u64(3).str("ok").u64(1000).raw("short").zeros(8).b, false, []string{`key "k"`, "string 1 of 3", "past end"}},
		{"unknown array element type", header(3, 0, 1).str("k").u32(uint32(ValueArray)).u32(99).u64(0).b, false, []string{`key "k"`, "unknown array element type 99"}},
		{"nesting too deep", func() []byte {
			c := header(3, 0, 1).str("k").u32(uint32(ValueArray))
			for i := 0; i < 100; i++ {
				c.u32(uint32(ValueArray)).u64(1)
			}
			return c.u32(uint32(ValueUint8)).u64(0).b
		}(), false, []string{`key "k"`, "nested deeper"}},
		{"duplicate key", header(3, 0, 2).kvU32("a.b", 1).kvU32("a.b", 2).b, false, []string{`key "a.b"`, "duplicate key (first at offset 24)", "offset 43"}},
		{"alignment not power of two", header(3, 0, 1).kvU32(KeyAlignment, 48).b, false, []string{`key "general.alignment"`, "not a power of two"}},
		{"alignment zero", header(3, 0, 1).kvU32(KeyAlignment, 0).b, false, []string{"alignment 0"}},
		{"alignment string", header(3, 0, 1).str(KeyAlignment).u32(uint32(ValueString)).str("32").b, false, []string{"alignment must be a non-negative integer, have str"}},
		{"tensor name past end", header(3, 1, 0).u64(1 << 50).zeros(40).b, false, []string{"tensor 0", "tensor name length"}},
		{"n_dims 5", header(3, 1, 0).tensor("t5", F32, 0, 1, 1, 1, 1, 1).zeros(64).b, false, []string{`tensor "t5"`, "n_dims 5"}},
		{"n_dims 0", header(3, 1, 0).tensor("t0", F32, 0).zeros(64).b, false, []string{`tensor "t0"`, "n_dims 0"}},
		{"zero dim", header(3, 1, 0).tensor("z", F32, 0, 16, 0).zeros(64).b, false, []string{`tensor "z"`, "dimension 1 is 0"}},
		{"negative dim", header(3, 1, 0).tensor("neg", F32, 0, 16, math.MaxUint64).zeros(64).b, false, []string{`tensor "neg"`, "dimension 1 is -1"}},
		{"element count overflow", header(3, 1, 0).tensor("big", F32, 0, 1<<32, 1<<32, 1<<32).zeros(64).b, false, []string{`tensor "big"`, "element count overflows"}},
		{"byte size overflow", header(3, 1, 0).tensor("bytes", F64, 0, 1<<31, 1<<31).zeros(64).b, false, []string{`tensor "bytes"`, "overflow"}},
		{"unknown tensor type", header(3, 1, 0).tensor("q", Type(40), 0, 64).zeros(64).b, true, []string{`tensor "q"`, "unknown tensor type 40"}},
		{"removed tensor type", header(3, 1, 0).tensor("q42", Type(4), 0, 32).zeros(64).b, true, []string{`tensor "q42"`, "unknown tensor type 4"}},
		{"row not a multiple of the block", header(3, 1, 0).tensor("q8", Q8_0, 0, 48).zeros(128).b, false, []string{`tensor "q8"`, "row length 48 not a multiple of the q8_0 block size 32"}},
		{"misaligned offset", oneF32(header(3, 1, 0).tensor("mis", F32, 4, 16)), false, []string{`tensor "mis"`, "data offset 4 not a multiple of the alignment 32"}},
		{"offset past end", oneF32(header(3, 1, 0).tensor("far", F32, 1<<40, 16)), false, []string{`tensor "far"`, "past end of file"}},
		{"offset wraps", oneF32(header(3, 1, 0).tensor("wrap", F32, math.MaxUint64-31, 16)), false, []string{`tensor "wrap"`, "data offset 18446744073709551584 past end of file (size 128; data section at 64)"}},
		{"size past end", oneF32(header(3, 1, 0).tensor("long", F32, 0, 17)), false, []string{`tensor "long"`, "data [", "past end of file (size"}},
		{"overlapping tensors", header(3, 2, 0).tensor("a", F32, 0, 16).tensor("b", F32, 32, 16).padTo(32).zeros(128).b, false, []string{`tensor "b"`, `overlaps tensor "a"`}},
		{"tensors at one offset", header(3, 2, 0).tensor("y", F32, 0, 16).tensor("x", F32, 0, 16).padTo(32).zeros(128).b, false, []string{`tensor "x"`, `overlaps tensor "y"`}},
		{"duplicate tensor name", header(3, 2, 0).tensor("w", F32, 0, 8).tensor("w", F32, 32, 8).padTo(32).zeros(64).b, false, []string{`tensor "w"`, "duplicate tensor name (first at offset 24)"}},
		{"tensor name not utf-8", header(3, 1, 0).tensor("\xc3", F32, 0, 8).padTo(32).zeros(32).b, false, []string{"tensor 0", "not valid UTF-8"}},
	}
}

func TestHostileFiles(t *testing.T) {
	for _, c := range hostileCases() {
		t.Run(c.name, func(t *testing.T) {
			var ms0, ms1 runtime.MemStats
			runtime.ReadMemStats(&ms0)
			f, err := Parse(c.data)
			runtime.ReadMemStats(&ms1)
			require.Error(t, err)
			assert.Nil(t, f)
			if c.unsupported {
				assert.ErrorIs(t, err, ErrUnsupported)
				assert.False(t, errors.Is(err, ErrFormat))
			} else {
				assert.ErrorIs(t, err, ErrFormat)
			}
			var fe *FormatError
			assert.ErrorAs(t, err, &fe)
			for _, w := range c.want {
				assert.Contains(t, err.Error(), w)
			}
			// A lying count must not cause a proportional allocation.
			assert.Less(t, ms1.TotalAlloc-ms0.TotalAlloc, uint64(1<<20), "allocated bytes")
		})
	}
}

// TestHostileControls checks that the crafter's well-formed variants of the
// hostile cases parse, so the cases above fail for the reason they state.
func TestHostileControls(t *testing.T) {
	ok := [][]byte{
		header(3, 0, 0).b,
		header(2, 0, 0).b,
		header(3, 0, 2).kvU32("a.b", 1).kvU32("a.c", 2).b,
		header(3, 0, 1).kvU32(KeyAlignment, 64).b,
		header(3, 1, 0).tensor("t", F32, 0, 16).padTo(32).zeros(64).b,
		header(3, 2, 0).tensor("a", F32, 0, 16).tensor("b", F32, 64, 16).padTo(32).zeros(128).b,
		header(3, 1, 0).tensor("q8", Q8_0, 0, 64).padTo(32).zeros(68).b,
		header(3, 0, 1).str("k").u32(uint32(ValueArray)).u32(uint32(ValueString)).u64(2).str("a").str("b").b,
	}
	for i, b := range ok {
		_, err := Parse(b)
		assert.NoError(t, err, "control %d", i)
	}
}

// TestTruncatedEverywhere cuts a valid file with metadata and tensors at
// every length: each prefix must fail cleanly.
func TestTruncatedEverywhere(t *testing.T) {
	w := NewWriter()
	for _, c := range roundTripValues {
		require.NoError(t, w.Set(c.key, c.v))
	}
	require.NoError(t, w.AddTensor("a", F32, []int64{4, 2}, make([]byte, 32)))
	require.NoError(t, w.AddTensor("b", Q4_0, []int64{32}, make([]byte, 18)))
	full := writeFile(t, w)
	_, err := Parse(full)
	require.NoError(t, err)
	// The file ends with the last tensor's padding; cutting into the
	// padding after "b"'s 18 bytes still leaves a valid file.
	last := len(full) - 32 + 18
	for n := 0; n < last; n++ {
		_, err := Parse(full[:n])
		require.Error(t, err, "prefix %d of %d", n, len(full))
		require.ErrorIs(t, err, ErrFormat, "prefix %d", n)
	}
}

// TestValueAccessorsReject checks the decoders' type checks and the bool
// byte check.
func TestValueAccessorsReject(t *testing.T) {
	b := header(3, 0, 4).
		str("s").u32(uint32(ValueString)).str("bad \xff utf8").
		str("b").u32(uint32(ValueBool)).u8(2).
		str("n").u32(uint32(ValueInt32)).u32(uint32(0xFFFFFFFF)).
		str("big").u32(uint32(ValueUint64)).u64(math.MaxUint64).b
	f, err := Parse(b)
	require.NoError(t, err)
	s, _ := f.Lookup("s")
	_, err = s.String()
	assert.ErrorIs(t, err, ErrFormat)
	raw, err := s.StringBytes()
	require.NoError(t, err)
	assert.Equal(t, "bad \xff utf8", string(raw))
	_, err = s.Uint64()
	assert.Error(t, err)
	bv, _ := f.Lookup("b")
	_, err = bv.Bool()
	assert.ErrorIs(t, err, ErrFormat)
	n, _ := f.Lookup("n")
	_, err = n.Uint64()
	assert.Error(t, err, "negative as unsigned")
	i, err := n.Int64()
	require.NoError(t, err)
	assert.Equal(t, int64(-1), i)
	fl, err := n.Float64()
	require.NoError(t, err)
	assert.Equal(t, -1.0, fl)
	big, _ := f.Lookup("big")
	_, err = big.Int64()
	assert.Error(t, err, "overflows int64")
	_, err = big.Array()
	assert.Error(t, err)
}
