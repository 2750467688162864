package engine

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/moonlm/moonlm/engine/chat"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// smolLM2Path finds the default model (SmolLM2-135M-Instruct Q4_1) as
// scripts/fetch-model.sh caches it, or skips the test.
func smolLM2Path(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("MOONLM_SMOLLM2"); p != "" {
		return p
	}
	var dirs []string
	if d := os.Getenv("MOONLM_MODELS"); d != "" {
		dirs = append(dirs, d)
	}
	if d := os.Getenv("XDG_CACHE_HOME"); d != "" {
		dirs = append(dirs, filepath.Join(d, "moonlm", "models"))
	}
	if h, err := os.UserHomeDir(); err == nil {
		dirs = append(dirs, filepath.Join(h, ".cache", "moonlm", "models"))
	}
	for _, d := range dirs {
		p := filepath.Join(d, "SmolLM2-135M-Instruct.Q4_1.gguf")
		if st, err := os.Stat(p); err == nil && st.Size() > 0 {
			return p
		}
	}
	t.Skip("SmolLM2-135M-Instruct Q4_1 not found: run scripts/fetch-model.sh or set MOONLM_SMOLLM2")
	return ""
}

func TestSmolLM2ChatCapitalOfFrance(t *testing.T) {
	m, err := Open(smolLM2Path(t), ModelParams{})
	require.NoError(t, err)
	defer m.Close()
	// The bare question is a near-tie for this Q4_1 model between
	// answering and rambling in French (top-2 logits within 0.05-0.15,
	// flipping with the cache type), so the test asks for one sentence,
	// where "The" leads by more than 1 and both caches answer alike.
	text, err := m.ApplyChatTemplate([]chat.Message{
		{Role: "user", Content: "What is the capital of France? Answer in one sentence."},
	}, true)
	require.NoError(t, err)
	assert.Contains(t, text, "<|im_start|>assistant")
	prompt, err := m.Tokenize(text, true, true)
	require.NoError(t, err)
	for _, kvf32 := range []bool{false, true} {
		s, err := m.NewSession(SessionParams{NCtx: 512, KVF32: kvf32})
		require.NoError(t, err)
		out := greedyUntilEOG(t, s, prompt, 48)
		s.Close()
		t.Logf("answer (f32 cache %v): %q", kvf32, out)
		assert.Contains(t, out, "Paris")
	}
}

func TestSmolLM2Completion(t *testing.T) {
	m, err := Open(smolLM2Path(t), ModelParams{})
	require.NoError(t, err)
	defer m.Close()
	prompt, err := m.Tokenize("The three primary colors are", true, false)
	require.NoError(t, err)
	s, err := m.NewSession(SessionParams{NCtx: 256})
	require.NoError(t, err)
	defer s.Close()
	out := greedyUntilEOG(t, s, prompt, 32)
	t.Logf("completion: %q", out)
	lower := strings.ToLower(out)
	// A coherent completion names the colours.
	assert.True(t, strings.Contains(lower, "red") && strings.Contains(lower, "blue"), "completion %q", out)
}

func greedyUntilEOG(t *testing.T, s *Session, prompt []int32, n int) string {
	m := s.Model()
	logits := make([]float32, m.Info().VocabSize)
	require.NoError(t, s.Prefill(prompt, logits))
	var ids []int32
	for len(ids) < n {
		tok := argmax(logits)
		if m.IsEOG(tok) {
			break
		}
		ids = append(ids, tok)
		require.NoError(t, s.Decode(tok, logits))
	}
	return m.Detokenize(ids)
}
