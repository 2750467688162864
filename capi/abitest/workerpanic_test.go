package abitest

import (
	"os"
	"runtime"
	"strings"
	"testing"

	"github.com/moonlm/moonlm/internal/shareddata"
)

func init() {
	children["workerpanic"] = func() error {
		l, err := childLib()
		if err != nil {
			return err
		}
		runtime.LockOSThread()
		path := os.Getenv("MOONLM_ABITEST_MODEL")
		var mp ModelParams
		l.ModelParamsDefault(&mp)
		mp.NThreads = 2 // the panic is armed on pool worker goroutine 1
		var m, s uintptr
		if st := l.ModelOpen(path, &mp, &m); st != OK {
			return errorf("open %s: %s", path, l.LastError())
		}
		if st := l.SessionNew(m, nil, &s); st != OK {
			return errorf("session: %s", l.LastError())
		}
		toks := []int32{1, 100, 200, 300}
		logits := make([]float32, 512)
		st := l.Prefill(s, &toks[0], uintptr(len(toks)), &logits[0], uintptr(len(logits)))
		msg := l.LastError()
		if st != Internal {
			return errorf("prefill with a panicking worker: status %d (%s), want INTERNAL; %s", st, l.StatusString(st), msg)
		}
		for _, want := range []string{"moonlm_prefill", "panic", "MOONLM_DEBUG_PANIC=worker"} {
			if !strings.Contains(msg, want) {
				return errorf("message %q lacks %q", msg, want)
			}
		}
		// The hook fires once: the same session works afterwards.
		if st := l.Prefill(s, &toks[0], uintptr(len(toks)), &logits[0], uintptr(len(logits))); st != OK {
			return errorf("prefill after the panic: %s", l.LastError())
		}
		if st := l.SessionFree(s); st != OK {
			return errorf("session free: %s", l.LastError())
		}
		if st := l.ModelFree(m); st != OK {
			return errorf("model free: %s", l.LastError())
		}
		return nil
	}
}

// A panic on one of the engine's worker goroutines during prefill becomes
// MOONLM_INTERNAL with a message, instead of killing the host; the session
// and model can still be used and freed. Runs in a child so that an escaped
// panic cannot take the tests with it.
func TestWorkerPanicBecomesInternal(t *testing.T) {
	l := lib(t)
	_ = openModel(t, l, stories)
	runInChild(t, "workerpanic", "MOONLM_DEBUG_PANIC=worker", "MOONLM_ABITEST_MODEL="+shareddata.Path(t, stories))
}
