package shareddata

import (
	"os"
	"path/filepath"
	"testing"
)

// SynthDir returns the folder of the generated synthetic models:
// $MOONLM_SYNTH_DIR (the Makefile sets it to build/synth), else build/synth
// of the repository, or "" if neither can be found.
func SynthDir() string {
	if d := os.Getenv("MOONLM_SYNTH_DIR"); d != "" {
		return d
	}
	if root := repoRoot(); root != "" {
		return filepath.Join(root, "build", "synth")
	}
	return ""
}

// SynthModel returns the path of the synthetic model name (for example
// synth-bert-Q8_0.gguf), which the engine's tests generate from its
// committed generator and check against its recorded sha256 (`make
// synth-models`, which `make test` runs first). It skips the test, saying
// how to make the file, when it is absent.
func SynthModel(tb testing.TB, name string) string {
	tb.Helper()
	dir := SynthDir()
	if dir == "" {
		tb.Skipf("synthetic model %s: no repository above the working folder and MOONLM_SYNTH_DIR unset", name)
	}
	p := filepath.Join(dir, name)
	if st, err := os.Stat(p); err != nil || !st.Mode().IsRegular() {
		tb.Skipf("synthetic model %s absent from %s: run `make synth-models` (go test ./engine -run TestWriteSynthModels), which generates it", name, dir)
	}
	return p
}
