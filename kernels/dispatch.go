package kernels

import (
	"fmt"
	"os"

	"github.com/moonlm/moonlm/gguf"
)

// numTypes bounds the ggml type enum (MXFP4 = 39 is the highest we know).
const numTypes = 40

// RowDotFunc is the signature of a per-type row dot product: the dot of one
// weight row w (n values in its GGUF block layout) with the activations x,
// already converted to VecDotType of the weight type.
type RowDotFunc func(n int, w, x []byte) float32

// RowsDotFunc computes y[i] = dot(row i, x) for len(y) consecutive weight
// rows of rowBytes bytes each, starting at w. SIMD variants may provide it to
// share activation loads across rows; nil falls back to a RowDotFunc loop.
type RowsDotFunc func(n int, w []byte, rowBytes int, x []byte, y []float32)

// rowDot is the dispatch table used by DotRow, MatVec and MatMul. It starts as
// the pure-Go kernels (a variable initializer, so it is ready before any
// init function runs); SIMD variants override entries from their init.
var rowDot = genericRowDot()

// rowsDot is the optional multi-row table (see RowsDotFunc); all nil in the
// generic build.
var rowsDot [numTypes]RowsDotFunc

// Float helper hooks, overridable by SIMD variants; Dot, Axpy and DotF16 call
// through them.
var (
	dotF32Impl  = dotF32Generic
	axpyF32Impl = axpyGeneric
	dotF16Impl  = dotF16Generic
)

// Variant names the kernel set in use: "generic", or one a SIMD file
// registered ("avx2", "avx512").
var Variant = "generic"

// variant is one registered kernel set: apply installs its entries on top of
// the generic tables.
type variant struct {
	name  string
	apply func()
}

// variants holds the registered sets, generic first, then in the order the
// architecture files register them (which should be from least to most
// capable, so the last one is the default).
var variants = []variant{{name: "generic", apply: func() {}}}

func genericRowDot() [numTypes]RowDotFunc {
	var t [numTypes]RowDotFunc
	t[gguf.F32] = dotF32Row
	t[gguf.F16] = dotF16Row
	t[gguf.BF16] = dotBF16Row
	t[gguf.Q4_0] = dotQ4_0Generic
	t[gguf.Q4_1] = dotQ4_1Generic
	t[gguf.Q5_0] = dotQ5_0Generic
	t[gguf.Q5_1] = dotQ5_1Generic
	t[gguf.Q8_0] = dotQ8_0Generic
	t[gguf.Q2_K] = dotQ2KGeneric
	t[gguf.Q3_K] = dotQ3KGeneric
	t[gguf.Q4_K] = dotQ4KGeneric
	t[gguf.Q5_K] = dotQ5KGeneric
	t[gguf.Q6_K] = dotQ6KGeneric
	t[gguf.IQ4_NL] = dotIQ4NLGeneric
	t[gguf.IQ4_XS] = dotIQ4XSGeneric
	return t
}

// GenericRowDot returns the pure-Go row dot kernel for t, or nil if t has
// none; tests compare SIMD variants against it.
func GenericRowDot(t gguf.Type) RowDotFunc {
	if int(t) >= numTypes {
		return nil
	}
	return genericRowDot()[t]
}

// RowDot returns the row dot kernel currently dispatched for t, or nil.
func RowDot(t gguf.Type) RowDotFunc {
	if int(t) >= numTypes {
		return nil
	}
	return rowDot[t]
}

// registerVariant adds a kernel set; architecture files call it from init
// and then call chooseDefaultVariant.
func registerVariant(name string, apply func()) {
	variants = append(variants, variant{name: name, apply: apply})
}

// chooseDefaultVariant installs the variant named by MOONLM_KERNELS, or else
// the last (most capable) one registered.
func chooseDefaultVariant() {
	if name := os.Getenv("MOONLM_KERNELS"); name != "" {
		if err := SetVariant(name); err == nil {
			return
		}
		fmt.Fprintf(os.Stderr, "moonlm: MOONLM_KERNELS=%q is not available here (have %v); using the default\n", name, Variants())
	}
	_ = SetVariant(variants[len(variants)-1].name)
}

// Variants lists the kernel sets this build and CPU support, "generic" first.
func Variants() []string {
	out := make([]string, len(variants))
	for i, v := range variants {
		out[i] = v.name
	}
	return out
}

// SetVariant switches every dispatch table to the named kernel set. It is
// not safe to call while kernels run on other goroutines.
func SetVariant(name string) error {
	for _, v := range variants {
		if v.name == name {
			rowDot = genericRowDot()
			rowsDot = [numTypes]RowsDotFunc{}
			tokensDot = [numTypes]TokensDotFunc{}
			dotF32Impl, axpyF32Impl, dotF16Impl = dotF32Generic, axpyGeneric, dotF16Generic
			v.apply()
			installPacked(name)
			Variant = name
			return nil
		}
	}
	return fmt.Errorf("kernels: unknown variant %q (have %v)", name, Variants())
}
