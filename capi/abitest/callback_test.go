package abitest

import (
	"unsafe"

	"github.com/ebitengine/purego"
)

// newPieceCallback makes the one C callback the tests pass to
// moonlm_generate (purego callbacks are never freed, so there is one); its
// user_data picks the recorder.
func newPieceCallback() uintptr {
	return purego.NewCallback(func(piece *byte, n uintptr, tok int32, ud uintptr) int32 {
		v, ok := recorders.Load(ud)
		if !ok {
			return 1
		}
		r := v.(*genRecorder)
		r.mu.Lock()
		if n > 0 {
			r.text.Write(unsafe.Slice(piece, n))
		}
		r.tokens = append(r.tokens, tok)
		count := len(r.tokens)
		hook := r.hook
		r.mu.Unlock()
		if hook != nil && hook(tok) {
			return 1
		}
		if r.stopAt > 0 && count >= r.stopAt {
			return 1
		}
		return 0
	})
}
