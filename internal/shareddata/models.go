package shareddata

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The default models, as scripts/fetch-model.sh names them.
const (
	SmolLM2 = "SmolLM2-135M-Instruct.Q4_1.gguf" // scripts/fetch-model.sh smollm2
	Gemma3  = "gemma-3-270m-q4_k_m.gguf"        // scripts/fetch-model.sh gemma3
)

// fetchArg is the argument of scripts/fetch-model.sh that writes each model.
var fetchArg = map[string]string{SmolLM2: "smollm2", Gemma3: "gemma3"}

// ModelDirs returns the folders searched for a default model, in order:
// $MOONLM_MODELS (which the Makefile sets to build/models), build/models of
// the repository, then ~/.cache/moonlm/models (where fetch-model.sh used to
// put them; only read, never written).
func ModelDirs() []string {
	var dirs []string
	if d := os.Getenv("MOONLM_MODELS"); d != "" {
		dirs = append(dirs, d)
	}
	if root := repoRoot(); root != "" {
		dirs = append(dirs, filepath.Join(root, "build", "models"))
	}
	if x := os.Getenv("XDG_CACHE_HOME"); x != "" && filepath.IsAbs(x) {
		dirs = append(dirs, filepath.Join(x, "moonlm", "models"))
	}
	if h, err := os.UserHomeDir(); err == nil {
		dirs = append(dirs, filepath.Join(h, ".cache", "moonlm", "models"))
	}
	return dirs
}

// FindModel returns the path of the named default model (SmolLM2, Gemma3)
// in the first of ModelDirs that holds a non-empty file of that name.
func FindModel(name string) (string, error) {
	dirs := ModelDirs()
	for _, d := range dirs {
		p := filepath.Join(d, name)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Size() > 0 {
			return p, nil
		}
	}
	hint := "scripts/fetch-model.sh"
	if a, ok := fetchArg[name]; ok {
		hint += " " + a
	}
	return "", fmt.Errorf("model %s not found in %s: run `%s` (or `make test`, which fetches it into build/models)",
		name, strings.Join(dirs, ", "), hint)
}

// Model returns the path of the named default model, skipping the test
// with the folders searched and how to fetch it when it is absent.
func Model(tb testing.TB, name string) string {
	tb.Helper()
	p, err := FindModel(name)
	if err != nil {
		tb.Skip(err.Error())
	}
	return p
}
