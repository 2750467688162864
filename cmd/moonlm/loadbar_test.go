package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestLoadBarWaitsASecondThenDraws(t *testing.T) {
	var out bytes.Buffer
	clock := time.Unix(0, 0)
	b := newLoadBar(&out, func() time.Time { return clock })
	require.True(t, b.update(0))
	clock = clock.Add(500 * time.Millisecond)
	require.True(t, b.update(0.3))
	require.Empty(t, out.String(), "an open under a second draws nothing")
	b.done()
	require.Empty(t, out.String())

	clock = clock.Add(600 * time.Millisecond)
	require.True(t, b.update(0.5))
	require.Equal(t, "\rloading model ["+strings.Repeat("#", 15)+strings.Repeat(" ", 15)+"]  50%", out.String())
	out.Reset()
	require.True(t, b.update(1))
	require.Equal(t, "\rloading model ["+strings.Repeat("#", 30)+"] 100%", out.String())
	out.Reset()
	b.done()
	require.Equal(t, "\r\033[K", out.String())
}
