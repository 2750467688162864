package abitest

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/moonlm/moonlm/internal/shareddata"
	"github.com/stretchr/testify/require"
)

// The complete example in docs/C-API.md compiles strictly and, run greedily
// on stories260K, continues its prompt the way the engine does.
func TestDocsExample(t *testing.T) {
	l := lib(t)
	root, err := repoRoot()
	require.NoError(t, err)
	doc, err := os.ReadFile(filepath.Join(root, "docs", "C-API.md"))
	require.NoError(t, err)
	sec := strings.Index(string(doc), "## A complete example")
	require.GreaterOrEqual(t, sec, 0, "docs/C-API.md lost its complete example")
	block := regexp.MustCompile("(?s)```c\n(.*?)```").FindStringSubmatch(string(doc)[sec:])
	require.NotNil(t, block, "no C block in the example section")
	exe := compileC(t, l, block[1])
	model := shareddata.Path(t, stories)
	out, err := exec.Command(exe, model, "Once upon a time").CombinedOutput()
	require.NoError(t, err, "%s", out)
	// Greedy from this prompt: llama.cpp's continuation (reference data).
	for _, ref := range readRefs(t, "reference/stories260K.ref.jsonl") {
		if ref.Prompt == "Once upon a time" {
			n := min(len(ref.GreedyText), 40)
			require.Contains(t, string(out), ref.GreedyText[:n])
			return
		}
	}
	t.Fatal("no reference for the prompt \"Once upon a time\"")
}
