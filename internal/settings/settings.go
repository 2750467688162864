// Package settings reads moonlm's environment variables, in one place, into
// explicit values: the C library reads them when it opens a model and the
// command-line tool when it starts, and both hand them on as parameters.
// Nothing below them (engine, kernels, gguf) reads the environment.
//
// Booleans have one syntax: 1, true, on, yes and 0, false, off, no, in any
// case, with surrounding space ignored; an empty or unset variable means
// the default. Any other value is an error that names the variable, so a
// typo fails the open (Apply) instead of being ignored; a variable the
// caller overrides with an explicit parameter is not looked at.
package settings

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/moonlm/moonlm/engine"
	"github.com/moonlm/moonlm/internal/packcache"
	"github.com/moonlm/moonlm/kernels"
)

// Toggle is a boolean setting that may be unset.
type Toggle int8

const (
	Unset Toggle = iota // the variable is unset or empty
	On
	Off
)

// Settings are the MOONLM_* variables, parsed.
type Settings struct {
	// Kernels is MOONLM_KERNELS: the kernel set; nil when unset (the
	// detected one).
	Kernels *kernels.Set
	// Pack is MOONLM_PACK: repack weights at open.
	Pack Toggle
	// PackedCache is MOONLM_PACKED_CACHE: keep packed weights on disk.
	PackedCache Toggle
	// CacheDir is MOONLM_PACKED_CACHE_DIR, else $XDG_CACHE_HOME/moonlm/packed
	// (when absolute), else ~/.cache/moonlm/packed; "" when none is known.
	CacheDir string
	// CacheBytes is MOONLM_PACKED_CACHE_BYTES (K, M, G, T suffixes, powers
	// of 1024); 0 when unset.
	CacheBytes int64
	// Debug is MOONLM_DEBUG, the debug topics ("pack", "cache", "all"),
	// comma- or space-separated, lower case.
	Debug []string
	// DebugPanic is MOONLM_DEBUG_PANIC: a C entry point (or "worker") that
	// panics on purpose, for testing the panic paths.
	DebugPanic string
	// Numerics is MOONLM_NUMERICS; engine.NumericsFast when unset.
	Numerics engine.Numerics

	// errs holds the malformed variables, by name.
	errs map[string]string
}

// Read parses the environment. It is the only function of moonlm that
// reads MOONLM_* variables (and XDG_CACHE_HOME and the home folder for the
// cache's default location). Malformed values are kept as errors that Err
// and Apply report.
func Read() Settings {
	return parse(os.LookupEnv, os.UserHomeDir)
}

// parse is Read over a given environment, for tests.
func parse(lookup func(string) (string, bool), home func() (string, error)) Settings {
	s := Settings{errs: map[string]string{}}
	get := func(name string) string {
		v, _ := lookup(name)
		return strings.TrimSpace(v)
	}
	fail := func(name, v, want string) {
		s.errs[name] = fmt.Sprintf("%s=%q: want %s", name, v, want)
	}
	if v := get("MOONLM_KERNELS"); v != "" {
		ks, err := kernels.New(strings.ToLower(v))
		if err != nil {
			s.errs["MOONLM_KERNELS"] = fmt.Sprintf("MOONLM_KERNELS=%q: %v", v, err)
		}
		s.Kernels = ks
	}
	for _, b := range []struct {
		name string
		dst  *Toggle
	}{{"MOONLM_PACK", &s.Pack}, {"MOONLM_PACKED_CACHE", &s.PackedCache}} {
		t, err := ParseToggle(get(b.name))
		if err != nil {
			fail(b.name, get(b.name), "1/true/on/yes or 0/false/off/no")
		}
		*b.dst = t
	}
	if d := get("MOONLM_PACKED_CACHE_DIR"); d != "" {
		s.CacheDir = d
	} else if x := get("XDG_CACHE_HOME"); x != "" && filepath.IsAbs(x) {
		s.CacheDir = filepath.Join(x, "moonlm", "packed")
	} else if h, err := home(); err == nil && h != "" {
		s.CacheDir = filepath.Join(h, ".cache", "moonlm", "packed")
	}
	if v := get("MOONLM_PACKED_CACHE_BYTES"); v != "" {
		n, err := packcache.ParseBytes(v)
		if err != nil {
			fail("MOONLM_PACKED_CACHE_BYTES", v, "a positive byte count with an optional K/M/G/T suffix")
		}
		s.CacheBytes = n
	}
	if v := get("MOONLM_DEBUG"); v != "" {
		for _, f := range strings.FieldsFunc(strings.ToLower(v), func(r rune) bool {
			return r == ',' || r == ' ' || r == ';' || r == ':' || r == '\t'
		}) {
			switch f {
			case "pack", "cache", "all":
				s.Debug = append(s.Debug, f)
			default:
				fail("MOONLM_DEBUG", v, "topics pack, cache or all")
			}
		}
	}
	s.DebugPanic = get("MOONLM_DEBUG_PANIC")
	switch v := strings.ToLower(get("MOONLM_NUMERICS")); v {
	case "", "fast":
	case "llamacpp", "llama.cpp":
		s.Numerics = engine.NumericsLlamaCpp
	case "llamacpp-norepack", "llama.cpp-norepack":
		s.Numerics = engine.NumericsLlamaCppNoRepack
	case "ik", "ik_llama.cpp":
		s.Numerics = engine.NumericsIk
	default:
		fail("MOONLM_NUMERICS", get("MOONLM_NUMERICS"), "fast, llamacpp, llamacpp-norepack or ik")
	}
	return s
}

// Err reports the malformed variables among names (all of them when names
// is empty) as one invalid-argument error, nil when there are none.
func (s Settings) Err(names ...string) error {
	if len(names) == 0 {
		for n := range s.errs {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	var msgs []string
	for _, n := range names {
		if m, ok := s.errs[n]; ok {
			msgs = append(msgs, m)
		}
	}
	if len(msgs) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s", engine.ErrInvalidArgument, strings.Join(msgs, "; "))
}

// ParseToggle parses a boolean setting: 1/true/on/yes, 0/false/off/no (any
// case, space trimmed), "" for Unset.
func ParseToggle(v string) (Toggle, error) {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "":
		return Unset, nil
	case "1", "true", "on", "yes":
		return On, nil
	case "0", "false", "off", "no":
		return Off, nil
	}
	return Unset, fmt.Errorf("%q is not a boolean (1/true/on/yes or 0/false/off/no)", v)
}

// Debugs reports whether MOONLM_DEBUG lists topic or "all".
func (s Settings) Debugs(topic string) bool {
	for _, t := range s.Debug {
		if t == topic || t == "all" {
			return true
		}
	}
	return false
}

// Apply fills the fields of p that the caller left at their defaults from
// the settings, so the engine gets every choice as a parameter: the kernel
// set, packing, the packed-weight cache (mode, folder, budget) and the
// numerics mode. Fields the caller set win. It fails, changing nothing,
// when a variable it would use is malformed (or MOONLM_DEBUG is).
func (s Settings) Apply(p *engine.ModelParams) error {
	use := []string{"MOONLM_DEBUG"}
	if p.Kernels == nil {
		use = append(use, "MOONLM_KERNELS")
	}
	if p.Pack == engine.PackDefault {
		use = append(use, "MOONLM_PACK")
	}
	if p.PackedCache.Mode == engine.CacheDefault {
		use = append(use, "MOONLM_PACKED_CACHE")
	}
	if p.PackedCache.MaxBytes <= 0 {
		use = append(use, "MOONLM_PACKED_CACHE_BYTES")
	}
	if p.Numerics == engine.NumericsFast {
		use = append(use, "MOONLM_NUMERICS")
	}
	if err := s.Err(use...); err != nil {
		return err
	}
	if p.Kernels == nil {
		p.Kernels = s.Kernels
	}
	if p.Kernels == nil {
		p.Kernels = kernels.Detect()
	}
	if p.Pack == engine.PackDefault {
		p.Pack = engine.PackOn
		if s.Pack == Off {
			p.Pack = engine.PackOff
		}
	}
	if p.PackedCache.Mode == engine.CacheDefault {
		p.PackedCache.Mode = engine.CacheOn
		if s.PackedCache == Off || s.CacheDir == "" {
			p.PackedCache.Mode = engine.CacheOff
		}
	}
	if p.PackedCache.Dir == "" {
		p.PackedCache.Dir = s.CacheDir
	}
	if p.PackedCache.MaxBytes <= 0 {
		p.PackedCache.MaxBytes = s.CacheBytes
		if p.PackedCache.MaxBytes <= 0 {
			p.PackedCache.MaxBytes = packcache.DefaultMaxBytes
		}
	}
	if p.Numerics == engine.NumericsFast {
		p.Numerics = s.Numerics
	}
	return nil
}
