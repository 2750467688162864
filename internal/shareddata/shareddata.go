// Package shareddata locates the data tests read in place: the shared test
// data (small models, tokenizer vectors, llama.cpp references), in
// $MOONLM_TESTDATA or ../shared/testdata beside the repository, and the
// default real models that scripts/fetch-model.sh fetches (see ModelDirs).
// Tests skip with a clear message where either is absent, so the suite still
// runs without them.
package shareddata

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Root returns the test data folder, or "" if it cannot be found.
func Root() string {
	if d := os.Getenv("MOONLM_TESTDATA"); d != "" {
		if st, err := os.Stat(d); err == nil && st.IsDir() {
			return d
		}
		return ""
	}
	root := repoRoot()
	if root == "" {
		return ""
	}
	d := filepath.Join(root, "..", "shared", "testdata")
	if st, err := os.Stat(d); err == nil && st.IsDir() {
		return d
	}
	return ""
}

// repoRoot returns the folder holding go.mod above the working directory
// (a test's package folder), or "".
func repoRoot() string {
	dir, err := os.Getwd()
	if err != nil {
		return ""
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}

// Path returns the path of rel inside the test data folder, skipping the test
// if the file is absent. A tokenizer vocabulary (vocab/NAME) or chat template
// (templates/NAME) that the folder lacks is also looked for where
// llama.cpp's source tree keeps it, in $MOONLM_LLAMACPP_DIR/models (the
// Makefile points that at build/llamacpp, which `make llamacpp-data` fills
// from llama-cpp-python's sdist).
func Path(tb testing.TB, rel string) string {
	tb.Helper()
	p, err := Find(rel)
	if err != nil {
		tb.Skip(err.Error())
	}
	return p
}

// Find is Path without the test: the path of rel, or why it cannot be had.
func Find(rel string) (string, error) {
	var reasons []string
	if root := Root(); root == "" {
		reasons = append(reasons, "shared test data not found: set MOONLM_TESTDATA or place it at ../shared/testdata")
	} else {
		p := filepath.Join(root, rel)
		_, err := os.Stat(p)
		if err == nil {
			return p, nil
		}
		reasons = append(reasons, fmt.Sprintf("test data file %s absent: %v", rel, err))
	}
	if lrel, ok := llamaCppRel(rel); ok {
		dir := os.Getenv("MOONLM_LLAMACPP_DIR")
		if dir == "" {
			reasons = append(reasons, "MOONLM_LLAMACPP_DIR (a llama.cpp source tree, or build/llamacpp from `make llamacpp-data`) is not set")
		} else {
			p := filepath.Join(dir, lrel)
			_, err := os.Stat(p)
			if err == nil {
				return p, nil
			}
			reasons = append(reasons, fmt.Sprintf("nor in the llama.cpp tree: %v", err))
		}
	}
	return "", errors.New(strings.Join(reasons, "; "))
}

// llamaCppRel is where llama.cpp's source tree keeps the shared test data's
// file rel, for the kinds of file it has: vocab/NAME is models/NAME and
// templates/NAME models/templates/NAME.
func llamaCppRel(rel string) (string, bool) {
	rel = filepath.ToSlash(rel)
	if name, ok := strings.CutPrefix(rel, "vocab/"); ok {
		return filepath.Join("models", filepath.FromSlash(name)), true
	}
	if strings.HasPrefix(rel, "templates/") {
		return filepath.Join("models", filepath.FromSlash(rel)), true
	}
	return "", false
}
