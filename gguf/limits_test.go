package gguf

import (
	"bytes"
	"errors"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// More metadata keys or tensors than MaxKeys and MaxTensors are
// ErrUnsupported before anything is indexed (an index entry costs several
// times a key's smallest encoding: a 19 MB file of a million keys made
// Parse allocate 108 MB); exactly the maximum parses.
func TestCountLimits(t *testing.T) {
	build := func(keys, tensors int) []byte {
		w := NewWriter()
		for i := 0; i < keys; i++ {
			require.NoError(t, w.Set("k"+strconv.Itoa(i), uint8(1)))
		}
		for i := 0; i < tensors; i++ {
			require.NoError(t, w.AddTensor("t"+strconv.Itoa(i), F32, []int64{1}, make([]byte, 4)))
		}
		var b bytes.Buffer
		_, err := w.WriteTo(&b)
		require.NoError(t, err)
		return b.Bytes()
	}
	f, err := Parse(build(MaxKeys, 0))
	require.NoError(t, err)
	assert.Len(t, f.Keys(), MaxKeys)
	_, err = Parse(build(MaxKeys+1, 0))
	require.True(t, errors.Is(err, ErrUnsupported), "got %v", err)
	assert.Contains(t, err.Error(), "metadata keys")
	f, err = Parse(build(0, MaxTensors))
	require.NoError(t, err)
	assert.Len(t, f.Tensors(), MaxTensors)
	_, err = Parse(build(0, MaxTensors+1))
	require.True(t, errors.Is(err, ErrUnsupported), "got %v", err)
	assert.Contains(t, err.Error(), "tensors")
}
