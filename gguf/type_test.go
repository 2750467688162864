package gguf

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTypeSizes checks the block sizes against the size formulas of the
// static_asserts in ggml's ggml-common.h (half = 2 bytes, QK_K = 256), a
// different statement of the same facts than the traits table.
func TestTypeSizes(t *testing.T) {
	const half, qk = 2, 256
	want := map[Type][2]int{
		F32: {1, 4}, F16: {1, 2}, BF16: {1, 2}, F64: {1, 8},
		I8: {1, 1}, I16: {1, 2}, I32: {1, 4}, I64: {1, 8},
		Q4_0:    {32, half + 32/2},
		Q4_1:    {32, 2*half + 32/2},
		Q5_0:    {32, half + 4 + 32/2},
		Q5_1:    {32, 2*half + 4 + 32/2},
		Q8_0:    {32, half + 32},
		Q8_1:    {32, 2*half + 32},
		Q2_K:    {qk, 2*half + qk/16 + qk/4},
		Q3_K:    {qk, half + qk/4 + qk/8 + 12},
		Q4_K:    {qk, 2*half + 12 + qk/2},
		Q5_K:    {qk, 2*half + 12 + qk/8 + qk/2},
		Q6_K:    {qk, half + qk/16 + 3*qk/4},
		Q8_K:    {qk, 4 + qk + qk/16*2},
		IQ2_XXS: {qk, half + qk/8*2},
		IQ2_XS:  {qk, half + qk/8*2 + qk/32},
		IQ2_S:   {qk, half + qk/4 + qk/16},
		IQ3_XXS: {qk, half + 3*(qk/8)},
		IQ3_S:   {qk, half + 13*(qk/32) + qk/64},
		IQ1_S:   {qk, half + qk/8 + qk/16},
		IQ1_M:   {qk, qk/8 + qk/16 + qk/32},
		IQ4_NL:  {32, half + 32/2},
		IQ4_XS:  {qk, half + 2 + qk/64 + qk/2},
		TQ1_0:   {qk, half + qk/64 + (qk-4*qk/64)/5},
		TQ2_0:   {qk, half + qk/4},
		MXFP4:   {32, 1 + 32/2},
	}
	require.Len(t, Types(), len(want))
	for _, ty := range Types() {
		w, ok := want[ty]
		require.True(t, ok, ty.String())
		assert.Equal(t, w[0], ty.BlockSize(), ty.String())
		assert.Equal(t, w[1], ty.BlockBytes(), ty.String())
		back, ok := ParseType(ty.String())
		assert.True(t, ok)
		assert.Equal(t, ty, back)
	}
	for _, bad := range []Type{4, 5, 31, 32, 33, 36, 37, 38, 40, 1 << 31} {
		assert.False(t, bad.Valid(), "%d", uint32(bad))
		assert.Zero(t, bad.BlockSize())
		_, err := bad.RowBytes(32)
		assert.ErrorIs(t, err, ErrUnsupported)
	}
	assert.Equal(t, "q4_K", Q4_K.String())
	assert.Equal(t, "iq4_xs", IQ4_XS.String())
	assert.Equal(t, "bf16", BF16.String())
	assert.Equal(t, "type(40)", Type(40).String())

	n, err := Q4_K.RowBytes(512)
	require.NoError(t, err)
	assert.Equal(t, int64(288), n)
	_, err = Q4_K.RowBytes(100)
	assert.Error(t, err)
	_, err = F32.RowBytes(-1)
	assert.Error(t, err)
	_, err = F64.RowBytes(1 << 61)
	assert.Error(t, err, "overflow")
}
