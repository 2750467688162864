package abitest

import (
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/moonlm/moonlm/internal/shareddata"
)

func init() {
	children["truncate"] = func() error {
		runtime.LockOSThread() // moonlm_last_error is per thread
		l, err := childLib()
		if err != nil {
			return err
		}
		path := os.Getenv("MOONLM_ABITEST_MODEL")
		var m, s uintptr
		if st := l.ModelOpen(path, nil, &m); st != OK {
			return errorf("open %s: %s", path, l.LastError())
		}
		if st := l.SessionNew(m, nil, &s); st != OK {
			return errorf("session: %s", l.LastError())
		}
		if st := l.Decode(s, 1, nil, 0); st != OK {
			return errorf("decode before truncation: %s", l.LastError())
		}
		// The file loses its tensor data while mapped: touching those pages
		// raises SIGBUS, which must come back as MOONLM_IO.
		if err := os.Truncate(path, 4096); err != nil {
			return err
		}
		st := l.Decode(s, 1, nil, 0)
		msg := l.LastError()
		if st != IOErr {
			return errorf("decode after truncation: status %d (%s), want MOONLM_IO; %s", st, l.StatusString(st), msg)
		}
		if !strings.Contains(msg, "moonlm_decode") {
			return errorf("message %q does not name the call", msg)
		}
		// The library still works for other things.
		if st := l.SessionFree(s); st != OK {
			return errorf("session free: %s", l.LastError())
		}
		if st := l.ModelFree(m); st != OK {
			return errorf("model free: %s", l.LastError())
		}
		return nil
	}
}

// A model truncated while mapped gives MOONLM_IO instead of killing the
// process with SIGBUS. Runs in a child so a SIGBUS cannot kill the tests.
func TestTruncatedModelIsIOError(t *testing.T) {
	l := lib(t)
	_ = openModel(t, l, stories)
	src := shareddata.Path(t, stories)
	dst := filepath.Join(t.TempDir(), "stories-copy.gguf")
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	runInChild(t, "truncate", "MOONLM_ABITEST_MODEL="+dst)
}
