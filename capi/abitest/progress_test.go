package abitest

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/ebitengine/purego"
	"github.com/moonlm/moonlm/internal/shareddata"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// progressRecorder collects one open's fractions; stop says whether to
// cancel after a fraction.
type progressRecorder struct {
	fractions []float32
	stop      func(n int, f float32) bool
}

var (
	progressRecorders sync.Map // user_data -> *progressRecorder
	progressOnce      sync.Once
	progressCB        uintptr
)

// progressCallback is the one C progress callback of the tests (purego
// callbacks are never freed); its user_data picks the recorder.
func progressCallback() uintptr {
	progressOnce.Do(func() {
		progressCB = purego.NewCallback(func(f float32, ud uintptr) int32 {
			v, ok := progressRecorders.Load(ud)
			if !ok {
				return 1
			}
			r := v.(*progressRecorder)
			r.fractions = append(r.fractions, f)
			if r.stop != nil && r.stop(len(r.fractions), f) {
				return 1
			}
			return 0
		})
	})
	return progressCB
}

// openWithProgress opens path with a progress callback recording into a
// new recorder, returning the status, the handle and the recorder.
func openWithProgress(t *testing.T, l *Lib, path string, stop func(int, float32) bool) (int32, uintptr, *progressRecorder) {
	st, m, r, _ := openWithProgressErr(t, l, path, stop)
	return st, m, r
}

// openWithProgressErr is openWithProgress with the open's last error (read
// on the thread that opened).
func openWithProgressErr(t *testing.T, l *Lib, path string, stop func(int, float32) bool) (int32, uintptr, *progressRecorder, string) {
	t.Helper()
	r := &progressRecorder{stop: stop}
	ud := uintptr(nextProgressID())
	progressRecorders.Store(ud, r)
	defer progressRecorders.Delete(ud)
	var p ModelParams
	l.ModelParamsDefault(&p)
	p.NThreads = 1
	p.PackedCache = 2 // off: the packed models pack at every open
	p.Progress, p.ProgressUserData = progressCallback(), ud
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var m uintptr = 1
	st := l.ModelOpen(path, &p, &m)
	return st, m, r, l.LastError()
}

var progressID struct {
	sync.Mutex
	n int
}

func nextProgressID() int {
	progressID.Lock()
	defer progressID.Unlock()
	progressID.n++
	return progressID.n
}

func requireRising(t *testing.T, fs []float32) {
	t.Helper()
	require.NotEmpty(t, fs)
	for i, f := range fs {
		require.True(t, f >= 0 && f <= 1, "fraction %v out of [0, 1]: %v", f, fs)
		if i > 0 {
			require.GreaterOrEqual(t, f, fs[i-1], "fractions decrease: %v", fs)
		}
	}
	require.LessOrEqual(t, len(fs), 102, "more than about a hundred calls: %v", fs)
}

// mapped says whether the process still maps path (a leaked model).
func mapped(t *testing.T, path string) bool {
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Skipf("no /proc/self/maps: %v", err)
	}
	return strings.Contains(string(b), path)
}

func TestOpenProgress(t *testing.T) {
	l := lib(t)
	for _, rel := range []string{"", stories} {
		var path string
		if rel == "" {
			path = shareddata.Model(t, shareddata.SmolLM2) // packs: most fractions come from packing
		} else {
			path = shareddata.Path(t, rel)
		}
		st, m, r := openWithProgress(t, l, path, nil)
		requireStatus(t, l, OK, st, "open with progress")
		requireRising(t, r.fractions)
		assert.Equal(t, float32(0), r.fractions[0])
		assert.Equal(t, float32(1), r.fractions[len(r.fractions)-1], "the last fraction")
		if rel == "" {
			assert.Greater(t, len(r.fractions), 20, "a packed model reports while packing: %v", r.fractions)
		}
		require.NoError(t, errOf(l, l.ModelFree(m)))
	}
}

func errOf(l *Lib, st int32) error {
	if st == OK {
		return nil
	}
	return &statusError{st, l.LastError()}
}

type statusError struct {
	st  int32
	msg string
}

func (e *statusError) Error() string { return e.msg }

// Cancelling at every call of an open (and mid-packing on a packed model)
// returns MOONLM_CANCELLED with no handle, takes no handle value, calls
// the callback no more and leaves the file neither mapped nor open.
func TestOpenProgressCancel(t *testing.T) {
	l := lib(t)
	path := shareddata.Path(t, stories)
	_, m0, full := openWithProgress(t, l, path, nil)
	require.NotZero(t, m0)
	requireStatus(t, l, OK, l.ModelFree(m0), "free")
	fds := openFDs(t)
	for stop := 1; stop <= len(full.fractions); stop++ {
		st, m, r, msg := openWithProgressErr(t, l, path, func(n int, _ float32) bool { return n >= stop })
		requireStatus(t, l, Cancelled, st, fmt.Sprintf("cancel at call %d", stop))
		assert.Zero(t, m, "*out after a cancelled open")
		assert.Len(t, r.fractions, stop, "calls after the cancelling one")
		assert.Contains(t, msg, "progress callback stopped the open")
	}
	smol := shareddata.Model(t, shareddata.SmolLM2)
	st, m, r := openWithProgress(t, l, smol, func(_ int, f float32) bool { return f >= 0.5 })
	requireStatus(t, l, Cancelled, st, "cancel while packing")
	assert.Zero(t, m)
	assert.Less(t, r.fractions[len(r.fractions)-1], float32(1))
	assert.False(t, mapped(t, smol), "a cancelled open left the model mapped")
	assert.False(t, mapped(t, path), "a cancelled open left the model mapped")
	assert.LessOrEqual(t, openFDs(t), fds, "open file descriptors after cancelled opens")

	// The handle sequence did not move for the cancelled opens: the next
	// model handle follows the last one given (no other test runs now).
	_, m1, _ := openWithProgress(t, l, path, nil)
	_, m2, _ := openWithProgress(t, l, path, func(int, float32) bool { return true })
	_, m3, _ := openWithProgress(t, l, path, nil)
	require.NotZero(t, m1)
	require.Zero(t, m2)
	require.NotZero(t, m3)
	assert.Equal(t, m1+1<<4, m3, "a cancelled open took a handle")
	requireStatus(t, l, OK, l.ModelFree(m1), "free")
	requireStatus(t, l, OK, l.ModelFree(m3), "free")
}

// A caller built before the progress members passes the size that ends
// before them: the library must not read them (garbage that would crash if
// it were called).
func TestOpenProgressOldSize(t *testing.T) {
	l := lib(t)
	path := shareddata.Path(t, stories)
	for _, size := range []uintptr{modelParamsV1Size, modelParamsV2Size, modelParamsV3Size} {
		var p ModelParams
		l.ModelParamsDefault(&p)
		p.Size = size
		p.Progress, p.ProgressUserData = 0xdead0000, 0xbeef // never called
		var m uintptr
		requireStatus(t, l, OK, l.ModelOpen(path, &p, &m), fmt.Sprintf("size %d", size))
		requireStatus(t, l, OK, l.ModelFree(m), "free")
	}
}
