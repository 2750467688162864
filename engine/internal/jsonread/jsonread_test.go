package jsonread

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The decoder's grammar and messages are tested through its users
// (engine/chat's TestDecodeJSON*, engine/grammar's schema tests); these
// test what only this package's API shows.

// TestDecodeTree: kinds, literal number text, offsets, and object keys in
// document order with repeats kept.
func TestDecodeTree(t *testing.T) {
	v, err := Decode([]byte(` {"b": [1, -2.50e3, "x\u00e9"], "a": null, "b": true} `), 10)
	require.NoError(t, err)
	require.Equal(t, Object, v.Kind)
	assert.Equal(t, 1, v.Offset)
	assert.Equal(t, []string{"b", "a", "b"}, v.Keys)
	require.Len(t, v.Items, 3)
	arr := v.Items[0]
	require.Equal(t, Array, arr.Kind)
	assert.Equal(t, Value{Kind: Number, Offset: 8, Text: "1"}, arr.Items[0])
	assert.Equal(t, Value{Kind: Number, Offset: 11, Text: "-2.50e3"}, arr.Items[1])
	assert.Equal(t, Value{Kind: String, Offset: 20, Text: "xé"}, arr.Items[2])
	assert.Equal(t, Null, v.Items[1].Kind)
	assert.Equal(t, Value{Kind: Bool, Offset: 48, Bool: true}, v.Items[2])
}

// TestDecodeDepth: maxDepth bounds nesting, with an *Error.
func TestDecodeDepth(t *testing.T) {
	_, err := Decode([]byte(`[[1]]`), 2)
	require.NoError(t, err)
	_, err = Decode([]byte(`[[[1]]]`), 2)
	var je *Error
	require.True(t, errors.As(err, &je), "%v", err)
	assert.Contains(t, je.Msg, "nested deeper than 2")
}

// TestDecodePrefix: the first value and its length; what follows is not read.
func TestDecodePrefix(t *testing.T) {
	v, n, err := DecodePrefix([]byte(`  {"a": 1} and then {broken`), 10)
	require.NoError(t, err)
	assert.Equal(t, 10, n)
	assert.Equal(t, []string{"a"}, v.Keys)
	_, err = Decode([]byte(`{"a": 1} x`), 10)
	assert.ErrorContains(t, err, "trailing data after the top-level value")
}

// TestAppendQuoted: Python json.dumps's escapes, with and without ascii.
func TestAppendQuoted(t *testing.T) {
	s := "a\"\\\n\r\t\b\f\x01\x7fé€😀"
	assert.Equal(t, `"a\"\\\n\r\t\b\f\u0001`+"\x7fé€😀"+`"`, string(AppendQuoted(nil, s, false)))
	assert.Equal(t, `"a\"\\\n\r\t\b\f\u0001\u007f\u00e9\u20ac\ud83d\ude00"`, string(AppendQuoted(nil, s, true)))
	assert.Equal(t, `x"\ufffd"`, string(AppendQuoted([]byte("x"), "\xff", true)))
}

// TestAppendU4: the \u escapes match fmt's %04x.
func TestAppendU4(t *testing.T) {
	for _, r := range []rune{0, 1, 0x1f, 0x7f, 0xe9, 0x20ac, 0xd83d, 0xffff} {
		assert.Equal(t, fmt.Sprintf(`\u%04x`, r), string(appendU4(nil, r)))
	}
}
