package kernels

import (
	"fmt"
	"sync"

	"github.com/moonlm/moonlm/gguf"
)

// numTypes bounds the ggml type enum (MXFP4 = 39 is the highest we know).
const numTypes = 40

// RowDotFunc is the signature of a per-type row dot product: the dot of one
// weight row w (n values in its GGUF block layout) with the activations x,
// already converted to VecDotType of the weight type.
type RowDotFunc func(n int, w, x []byte) float32

// RowsDotFunc computes y[i] = dot(row i, x) for len(y) consecutive weight
// rows of rowBytes bytes each, starting at w. SIMD sets may provide it to
// share activation loads across rows; nil falls back to a RowDotFunc loop.
type RowsDotFunc func(n int, w []byte, rowBytes int, x []byte, y []float32)

// isa is the instruction-set level a kernel set's helpers may use.
type isa uint8

const (
	isaGeneric isa = iota // pure Go
	isaAVX2               // AVX2, FMA, F16C
	isaAVX512             // isaAVX2 plus AVX-512 F, BW, VL, VNNI
	numISA
)

// asmKernel names one SIMD kernel, as the format table lists them; the
// architecture that has it maps the name to its code (on amd64,
// simd_adapter_amd64.go), and no set of another architecture asks for it.
type asmKernel uint8

// The SIMD kernels: multi-row kernels (Rows), four-token kernels (Tok4)
// and tile kernels (Tile, several rows against four tokens), which compute
// each token exactly as their level's Rows kernel does.
const (
	_ asmKernel = iota
	asmQ8_0RowsAVX2
	asmQ4_0RowsAVX2
	asmQ4_1RowsAVX2
	asmQ5_0RowsAVX2
	asmQ4_KRowsAVX2
	asmQ6_KRowsAVX2
	asmF16RowsAVX2
	asmF32RowsAVX2
	asmQ8_0RowsAVX512
	asmQ4_0RowsAVX512
	asmQ5_0RowsAVX512
	asmQ8_0Tok4AVX2
	asmQ4_0Tok4AVX2
	asmQ4_1Tok4AVX2
	asmQ4_KTok4AVX2
	asmQ6_KTok4AVX2
	asmMXFP4RowsAVX2
	asmMXFP4RowsAVX512
	asmF16Tok4AVX512
	asmF16Tok4AVX2
	asmMXFP4Tok4AVX2
	asmMXFP4Tok4AVX512
	asmF16Tile3x4AVX512
	asmF16Tile3x4AVX2
)

// asmPacked names a packed layout of a SIMD level (a pure-Go layout's bytes
// with that level's kernel), as the format table lists them; the
// architecture that has it maps the name to the layout (on amd64,
// packed_amd64.go), and no set of another architecture asks for it.
type asmPacked uint8

// The SIMD packed layouts; the GFNI forms replace their VNNI ones in a set
// that uses GFNI.
const (
	_ asmPacked = iota
	asmPackedQ8_0AVX512
	asmPackedQ5_0AVX512
	asmPackedQ4_1AVX512
	asmPackedQ4_1GFNI
	asmPackedQ4_KAVX512
	asmPackedQ4_KGFNI
	asmPackedQ6_KAVX512
)

// simdKernels names a type's kernels at one instruction-set level (zero:
// none at that level).
type simdKernels struct {
	rows asmKernel // the multi-row kernel, also the one-row one
	tok4 asmKernel // the four-token kernel; the last nTok%4 tokens take the rows kernel
	// tile is the tile kernel (rows x four tokens); the rows and tokens
	// left over take the level's tokens and rows kernels.
	tile asmKernel
	// packed is the type's packed layout at this level, packedGFNI its
	// form for a set that uses GFNI (zero: the packed form).
	packed, packedGFNI asmPacked
}

// packedFor is the packed layout k names for a set that uses GFNI or not
// (zero: none at this level).
func (k simdKernels) packedFor(gfni bool) asmPacked {
	if gfni && k.packedGFNI != 0 {
		return k.packedGFNI
	}
	return k.packed
}

// Set is one kernel set: the row, multi-row and multi-token dot kernels per
// weight type, the packed layouts it brings, and the float helpers
// (softmax, RoPE, attention dots, activation quantization) at one
// instruction-set level. A Set is chosen once (Detect, New) and passed to
// whoever runs kernels; it is immutable, so any number of goroutines may
// use it, and two sets can run side by side in one process.
type Set struct {
	name string
	isa  isa
	// gfni selects the GFNI forms of the packed q4_1 and q4_K kernels.
	gfni bool
	// amx: encoders' f16 products may take the AMX tiles where the OS
	// grants them (EncoderPacked).
	amx bool

	// types holds the set's kernels for each weight type.
	types [numTypes]typeKernels

	dotF32  func(a, b []float32) float32
	axpyF32 func(y []float32, a float32, x []float32)
	dotF16  func(a, b []uint16) float32
}

// typeKernels are a set's kernels for one weight type; nil entries fall
// back to the next simpler form (tile to tokens, tokens and rows to row)
// or mean none (row: unsupported, packed: used as mapped).
type typeKernels struct {
	row    RowDotFunc
	rows   RowsDotFunc
	tokens TokensDotFunc
	tile   TileDotFunc
	packed *PackedLayout
}

// setDef describes one kernel set an architecture file offers.
type setDef struct {
	name string
	isa  isa
	// supported reports whether this CPU runs the set.
	supported func() bool
	// The set's float helpers; nil keeps the generic ones. Its per-type
	// kernels are in the format table (format.simd).
	dotF32  func(a, b []float32) float32
	axpyF32 func(y []float32, a float32, x []float32)
	dotF16  func(a, b []uint16) float32
}

// genericDef is the pure-Go set every build has.
var genericDef = setDef{name: "generic", isa: isaGeneric, supported: func() bool { return true }}

// Name returns the set's name: "generic", "avx2" or "avx512".
func (s *Set) Name() string { return s.name }

// String returns the set's name.
func (s *Set) String() string { return s.name }

// vec reports whether the AVX2/FMA/F16C helpers may run.
func (s *Set) vec() bool { return s.isa >= isaAVX2 }

// wide reports whether the AVX-512 helpers may run.
func (s *Set) wide() bool { return s.isa >= isaAVX512 }

// Available lists the kernel sets this build and CPU run, "generic" first
// and the most capable last.
func Available() []string {
	var out []string
	for _, d := range archSets() {
		if d.supported() {
			out = append(out, d.name)
		}
	}
	return out
}

// Known lists every kernel set this build has, whether or not the CPU runs
// it.
func Known() []string {
	var out []string
	for _, d := range archSets() {
		out = append(out, d.name)
	}
	return out
}

// New returns the named kernel set, or an error when the build has no such
// set or this CPU lacks the instructions it needs.
func New(name string) (*Set, error) {
	return newSet(name, hasGFNI())
}

// newSet is New with the GFNI forms of the packed kernels on or off (tests
// check both forms on a CPU that has GFNI).
func newSet(name string, gfni bool) (*Set, error) {
	for _, d := range archSets() {
		if d.name != name {
			continue
		}
		if !d.supported() {
			return nil, fmt.Errorf("kernels: this CPU cannot run the %q kernels (it runs %v)", name, Available())
		}
		return build(d, gfni), nil
	}
	return nil, fmt.Errorf("kernels: no kernel set %q (this build has %v)", name, Known())
}

// build makes the set d describes: for each type the generic row kernel
// (and multi-token kernel, where the type has one), then the format
// table's kernels of every instruction-set level up to
// d's, each over the one below (the packed layouts likewise); then d's
// float helpers.
func build(d setDef, gfni bool) *Set {
	s := &Set{name: d.name, isa: d.isa, gfni: gfni && d.isa >= isaAVX512, amx: d.isa >= isaAVX512 && amxCPU(),
		dotF32: dotF32Generic, axpyF32: axpyGeneric, dotF16: dotF16Generic}
	for t := range formats {
		f := &formats[t]
		k := &s.types[t]
		k.row, k.tokens, k.tile = f.dot, f.tokens, f.tile
		var rows asmKernel // the rows kernel of the levels so far
		for level := isaGeneric + 1; level <= d.isa; level++ {
			if r := f.simd[level].rows; r != 0 {
				rows = r
			}
			f.simd[level].apply(gguf.Type(t), k, rows)
			if p := f.simd[level].packedFor(s.gfni); p != 0 {
				k.packed = packedLayout(p)
				if err := checkLayout(gguf.Type(t), k.packed); err != nil {
					panic(err)
				}
			}
		}
	}
	if d.dotF32 != nil {
		s.dotF32, s.axpyF32, s.dotF16 = d.dotF32, d.axpyF32, d.dotF16
	}
	return s
}

// detected is the best set of this CPU, built once.
var detected = sync.OnceValue(func() *Set {
	a := Available()
	s, err := New(a[len(a)-1])
	if err != nil {
		panic(err) // Available only lists sets the CPU runs
	}
	return s
})

// Detect returns the most capable kernel set this CPU runs. Every call
// returns the same Set.
func Detect() *Set { return detected() }

// RowDot returns the set's row dot kernel for t, or nil.
func (s *Set) RowDot(t gguf.Type) RowDotFunc {
	if t >= numTypes {
		return nil
	}
	return s.types[t].row
}
