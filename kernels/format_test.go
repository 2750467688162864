package kernels

import (
	"testing"

	"github.com/moonlm/moonlm/gguf"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// blockGeom is gguf's block geometry of t, as the tests index blocks.
func blockGeom(t gguf.Type) (size, bytes int) { return t.BlockSize(), t.BlockBytes() }

// TestFormatTable: every entry is consistent: a type with a row dot can be
// dequantized and quantized, its activation type has a quantizer and the
// same block size, RowBytes agrees with gguf.Type.RowBytes, and the
// packed layouts of an entry are of its type.
func TestFormatTable(t *testing.T) {
	for i, f := range formats {
		typ := gguf.Type(i)
		if f.dequant == nil && f.quantize == nil && f.dot == nil {
			continue
		}
		require.True(t, typ.Valid(), "%v has an entry but gguf does not know it", typ)
		n := 4 * typ.BlockSize()
		want, err := typ.RowBytes(int64(n))
		require.NoError(t, err)
		assert.Equal(t, int(want), RowBytes(typ, n), "%v RowBytes", typ)
		assert.NotNil(t, f.dequant, "%v dequant", typ)
		assert.NotNil(t, f.quantize, "%v quantize", typ)
		assert.Equal(t, f.dot != nil, Supported(typ), "%v Supported", typ)
		if f.dot != nil {
			vt := VecDotType(typ)
			assert.NotNil(t, formats[vt].quantize, "%v: activation type %v has no quantizer", typ, vt)
			assert.Zero(t, typ.BlockSize()%vt.BlockSize(), "%v: activation blocks of %v do not tile its blocks", typ, vt)
		}
		for _, l := range []*PackedLayout{f.exact, f.exact8x8, f.ik} {
			if l != nil {
				assert.Equal(t, typ, l.Type, "%v: layout %s", typ, l.Name)
			}
		}
	}
	assert.Nil(t, formatOf(numTypes))
	assert.False(t, Supported(gguf.IQ2_XXS))
	assert.Zero(t, RowBytes(gguf.Type(1000), 256))
	assert.Panics(t, func() { DequantizeRow(gguf.IQ2_XXS, make([]byte, 66), make([]float32, 256)) })
	assert.Panics(t, func() { QuantizeRow(gguf.IQ2_XXS, make([]float32, 256), make([]byte, 66)) })
	assert.Panics(t, func() { DequantizeRow(gguf.Q4_0, make([]byte, 18), make([]float32, 31)) })
}
