package kernels

import (
	"fmt"

	"github.com/moonlm/moonlm/gguf"
)

// SetPackedForTest makes l the packed layout of weight type t (nil removes
// it) until restore is called, so that packages above kernels can test
// their packing with a layout of their own before real layouts exist, or
// with none. Like SetVariant, it must not be called while kernels run; a
// SetVariant in between reinstalls the variant's layouts.
func SetPackedForTest(t gguf.Type, l *PackedLayout) (restore func()) {
	if int(t) >= numTypes || t < 0 {
		panic(fmt.Sprintf("kernels: SetPackedForTest: type %v out of range", t))
	}
	if l != nil && (l.Type != t || l.Rows <= 0 || l.MaxTok <= 0 || l.Rows*l.MaxTok > maxPackedTile) {
		panic(fmt.Sprintf("kernels: SetPackedForTest: layout %s (type %v, %d rows x %d tokens) cannot serve %v", l.Name, l.Type, l.Rows, l.MaxTok, t))
	}
	prev := packedLayouts[t]
	packedLayouts[t] = l
	return func() { packedLayouts[t] = prev }
}
