package settings

import (
	"errors"
	"testing"

	"github.com/moonlm/moonlm/engine"
	"github.com/moonlm/moonlm/internal/packcache"
	"github.com/moonlm/moonlm/kernels"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// env returns a lookup over m and a home folder.
func env(m map[string]string) (func(string) (string, bool), func() (string, error)) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok },
		func() (string, error) { return "/home/u", nil }
}

func parseMap(m map[string]string) (Settings, error) {
	l, h := env(m)
	s := parse(l, h)
	return s, s.Err()
}

func TestParseToggle(t *testing.T) {
	for _, v := range []string{"1", "true", "TRUE", " on ", "Yes"} {
		got, err := ParseToggle(v)
		require.NoError(t, err, v)
		assert.Equal(t, On, got, v)
	}
	for _, v := range []string{"0", "false", "Off", "NO", "\t0\n"} {
		got, err := ParseToggle(v)
		require.NoError(t, err, v)
		assert.Equal(t, Off, got, v)
	}
	got, err := ParseToggle("  ")
	require.NoError(t, err)
	assert.Equal(t, Unset, got)
	for _, v := range []string{"2", "enabled", "y", "nope", "-1"} {
		_, err := ParseToggle(v)
		assert.Error(t, err, v)
	}
}

func TestReadDefaults(t *testing.T) {
	s, err := parseMap(nil)
	require.NoError(t, err)
	assert.Nil(t, s.Kernels)
	assert.Equal(t, Unset, s.Pack)
	assert.Equal(t, Unset, s.PackedCache)
	assert.Equal(t, "/home/u/.cache/moonlm/packed", s.CacheDir)
	assert.Zero(t, s.CacheBytes)
	assert.Empty(t, s.Debug)
	assert.Empty(t, s.DebugPanic)
	assert.Equal(t, engine.NumericsFast, s.Numerics)

	s, err = parseMap(map[string]string{"XDG_CACHE_HOME": "/x"})
	require.NoError(t, err)
	assert.Equal(t, "/x/moonlm/packed", s.CacheDir)
	s, err = parseMap(map[string]string{"XDG_CACHE_HOME": "relative"})
	require.NoError(t, err)
	assert.Equal(t, "/home/u/.cache/moonlm/packed", s.CacheDir, "a relative XDG_CACHE_HOME is ignored")
	l, _ := env(nil)
	s = parse(l, func() (string, error) { return "", errors.New("no home") })
	require.NoError(t, s.Err())
	assert.Empty(t, s.CacheDir)
}

func TestReadValues(t *testing.T) {
	s, err := parseMap(map[string]string{
		"MOONLM_KERNELS":            "Generic",
		"MOONLM_PACK":               "off",
		"MOONLM_PACKED_CACHE":       "No",
		"MOONLM_PACKED_CACHE_DIR":   "/c",
		"MOONLM_PACKED_CACHE_BYTES": "2G",
		"MOONLM_DEBUG":              "pack, cache",
		"MOONLM_DEBUG_PANIC":        "moonlm_decode",
		"MOONLM_NUMERICS":           "llama.cpp",
		"XDG_CACHE_HOME":            "/x",
	})
	require.NoError(t, err)
	require.NotNil(t, s.Kernels)
	assert.Equal(t, "generic", s.Kernels.Name())
	assert.Equal(t, Off, s.Pack)
	assert.Equal(t, Off, s.PackedCache)
	assert.Equal(t, "/c", s.CacheDir, "MOONLM_PACKED_CACHE_DIR wins over XDG_CACHE_HOME")
	assert.Equal(t, int64(2<<30), s.CacheBytes)
	assert.True(t, s.Debugs("pack"))
	assert.True(t, s.Debugs("cache"))
	assert.Equal(t, "moonlm_decode", s.DebugPanic)
	assert.Equal(t, engine.NumericsLlamaCpp, s.Numerics)

	s, err = parseMap(map[string]string{"MOONLM_DEBUG": "all", "MOONLM_NUMERICS": "ik"})
	require.NoError(t, err)
	assert.True(t, s.Debugs("cache"))
	assert.Equal(t, engine.NumericsIk, s.Numerics)
}

// TestReadErrors: every malformed value is an invalid-argument error that
// names its variable, and the others are still parsed.
func TestReadErrors(t *testing.T) {
	for name, v := range map[string]string{
		"MOONLM_KERNELS":            "sse9",
		"MOONLM_PACK":               "2",
		"MOONLM_PACKED_CACHE":       "maybe",
		"MOONLM_PACKED_CACHE_BYTES": "lots",
		"MOONLM_DEBUG":              "verbose",
		"MOONLM_NUMERICS":           "exact",
	} {
		s, err := parseMap(map[string]string{name: v, "MOONLM_DEBUG_PANIC": "worker"})
		require.Error(t, err, name)
		assert.ErrorIs(t, err, engine.ErrInvalidArgument, name)
		assert.ErrorContains(t, err, name+"=", name)
		assert.Equal(t, "worker", s.DebugPanic, "%s: the other variables are still read", name)
	}
	_, err := parseMap(map[string]string{"MOONLM_PACK": "2", "MOONLM_NUMERICS": "exact"})
	assert.ErrorContains(t, err, "MOONLM_PACK=")
	assert.ErrorContains(t, err, "MOONLM_NUMERICS=")
}

// TestApply: settings fill the parameters left at their defaults, explicit
// parameters win, and the result leaves nothing for the engine to look up.
func TestApply(t *testing.T) {
	generic, err := kernels.New("generic")
	require.NoError(t, err)

	var p engine.ModelParams
	require.NoError(t, Settings{CacheDir: "/c"}.Apply(&p))
	assert.Same(t, kernels.Detect(), p.Kernels)
	assert.Equal(t, engine.PackOn, p.Pack)
	assert.Equal(t, engine.CacheOn, p.PackedCache.Mode)
	assert.Equal(t, "/c", p.PackedCache.Dir)
	assert.Equal(t, int64(packcache.DefaultMaxBytes), p.PackedCache.MaxBytes)
	assert.Equal(t, engine.NumericsFast, p.Numerics)

	p = engine.ModelParams{}
	require.NoError(t, Settings{Kernels: generic, Pack: Off, PackedCache: Off, CacheDir: "/c", CacheBytes: 5, Numerics: engine.NumericsIk}.Apply(&p))
	assert.Same(t, generic, p.Kernels)
	assert.Equal(t, engine.PackOff, p.Pack)
	assert.Equal(t, engine.CacheOff, p.PackedCache.Mode)
	assert.Equal(t, int64(5), p.PackedCache.MaxBytes)
	assert.Equal(t, engine.NumericsIk, p.Numerics)

	p = engine.ModelParams{}
	require.NoError(t, Settings{}.Apply(&p))
	assert.Equal(t, engine.CacheOff, p.PackedCache.Mode, "no cache folder: no cache")

	best := kernels.Detect()
	p = engine.ModelParams{Kernels: best, Pack: engine.PackOn, Numerics: engine.NumericsLlamaCpp,
		PackedCache: engine.PackedCacheParams{Mode: engine.CacheOn, Dir: "/mine", MaxBytes: 9}}
	require.NoError(t, Settings{Kernels: generic, Pack: Off, PackedCache: Off, CacheDir: "/c", CacheBytes: 5, Numerics: engine.NumericsIk}.Apply(&p))
	assert.Same(t, best, p.Kernels)
	assert.Equal(t, engine.PackOn, p.Pack)
	assert.Equal(t, engine.CacheOn, p.PackedCache.Mode)
	assert.Equal(t, "/mine", p.PackedCache.Dir)
	assert.Equal(t, int64(9), p.PackedCache.MaxBytes)
	assert.Equal(t, engine.NumericsLlamaCpp, p.Numerics)
}

// TestReadIsTheEnvironment: Read sees the process environment.
func TestReadIsTheEnvironment(t *testing.T) {
	t.Setenv("MOONLM_PACK", "no")
	t.Setenv("MOONLM_KERNELS", "generic")
	s := Read()
	require.NoError(t, s.Err())
	assert.Equal(t, Off, s.Pack)
	assert.Equal(t, "generic", s.Kernels.Name())
	t.Setenv("MOONLM_PACK", "nein")
	assert.ErrorContains(t, Read().Err(), `MOONLM_PACK="nein"`)
}

// TestApplyErrors: a malformed variable fails Apply only when Apply would
// use it, and then leaves the parameters alone.
func TestApplyErrors(t *testing.T) {
	l, h := env(map[string]string{"MOONLM_NUMERICS": "bogus", "MOONLM_PACK": "2"})
	s := parse(l, h)
	var p engine.ModelParams
	err := s.Apply(&p)
	assert.ErrorIs(t, err, engine.ErrInvalidArgument)
	assert.ErrorContains(t, err, `MOONLM_NUMERICS="bogus"`)
	assert.ErrorContains(t, err, `MOONLM_PACK="2"`)
	assert.Equal(t, engine.ModelParams{}, p)
	p = engine.ModelParams{Numerics: engine.NumericsLlamaCpp, Pack: engine.PackOff}
	require.NoError(t, s.Apply(&p), "explicit parameters need neither variable")
	assert.Equal(t, engine.NumericsLlamaCpp, p.Numerics)
	l, h = env(map[string]string{"MOONLM_DEBUG": "verbose"})
	assert.ErrorContains(t, parse(l, h).Apply(&engine.ModelParams{}), "MOONLM_DEBUG=")
}
