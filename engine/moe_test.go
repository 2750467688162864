package engine

import (
	"errors"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/moonlm/moonlm/engine/arch"
	"github.com/moonlm/moonlm/kernels"
)

// TestChooseExperts: the top-k by probability, most probable first, with
// the weights renormalized (or not) and scaled, as llama.cpp's
// build_moe_ffn computes them.
func TestChooseExperts(t *testing.T) {
	probs := []float32{0.05, 0.30, 0.10, 0.25, 0.30, 0}
	sel, w := make([]int32, 3), make([]float32, 3)
	chooseExperts(append([]float32(nil), probs...), sel, w, &arch.MoEParams{NormW: true, WScale: 1}, nil)
	assert.Equal(t, []int32{1, 4, 3}, sel, "most probable first, the lower index first among equals")
	sum := float32(0.30 + 0.30 + 0.25)
	assert.Equal(t, []float32{0.30 / sum, 0.30 / sum, 0.25 / sum}, w)

	chooseExperts(append([]float32(nil), probs...), sel, w, &arch.MoEParams{WScale: 2}, nil)
	assert.Equal(t, []float32{0.60, 0.60, 0.50}, w, "not renormalized, scaled")

	// All-zero chosen weights: the sum is clamped, not divided by zero.
	sel, w = make([]int32, 2), make([]float32, 2)
	chooseExperts([]float32{0, 0, 0}, sel, w, &arch.MoEParams{NormW: true, WScale: 1}, nil)
	assert.Equal(t, []int32{0, 1}, sel)
	assert.Equal(t, []float32{0, 0}, w)

	// NaN probabilities are chosen last, and every index stays in range.
	nan := float32(math.NaN())
	chooseExperts([]float32{nan, nan, 0.5}, sel, w, &arch.MoEParams{WScale: 1}, nil)
	assert.Equal(t, []int32{2, 0}, sel)
}

// TestQwen3MoeDecodeMatchesPrefill: decoding token by token (the inline
// one-token MoE path) gives the logits of prefilling the same tokens (the
// batched path with its slots sorted by expert).
func TestQwen3MoeDecodeMatchesPrefill(t *testing.T) {
	m, err := Open(synthModel(t, "synth-qwen3moe-Q8_0.gguf"), ModelParams{Threads: 2})
	require.NoError(t, err)
	defer m.Close()
	toks, err := m.Tokenize("Once upon a time there was a little dog", true, false)
	require.NoError(t, err)
	vocab := m.Info().VocabSize
	s, err := m.NewSession(SessionParams{KVF32: true, NCtx: 64})
	require.NoError(t, err)
	defer s.Close()
	all := make([]float32, len(toks)*vocab)
	require.NoError(t, s.PrefillAll(toks, all))
	require.NoError(t, s.Rewind(0))
	lg := make([]float32, vocab)
	for i, tok := range toks {
		require.NoError(t, s.Decode(tok, lg))
		want := all[i*vocab : (i+1)*vocab]
		for v := range lg {
			require.InDelta(t, want[v], lg[v], 1e-3, "position %d, token %d", i, v)
		}
	}
}

// TestQwen3MoeDecodeAllocs: a MoE decode step allocates nothing, with
// the experts' gate and up apart and fused (ffn_gate_up_exps).
func TestQwen3MoeDecodeAllocs(t *testing.T) {
	for _, name := range []string{"synth-qwen3moe-Q8_0.gguf", "synth-qwen35moe-gateup-Q8_0.gguf"} {
		t.Run(name, func(t *testing.T) {
			m, err := Open(synthModel(t, name), ModelParams{Threads: 2})
			require.NoError(t, err)
			defer m.Close()
			s, err := m.NewSession(SessionParams{NCtx: 256})
			require.NoError(t, err)
			defer s.Close()
			lg := make([]float32, m.Info().VocabSize)
			require.NoError(t, s.Prefill([]int32{1, 403, 407}, lg))
			allocs := testing.AllocsPerRun(20, func() {
				require.NoError(t, s.Decode(261, lg))
			})
			assert.Zero(t, allocs, "allocations per decoded token")
		})
	}
}

// TestQwen3MoeRoutingMatters: the same file routed to one expert instead
// of two misses the reference by far more than the parity tolerance, so
// the reference tests see the routing and the weighting.
func TestQwen3MoeRoutingMatters(t *testing.T) {
	spec := synthMoESpecs[0]
	path := withKey(t, synthMoEF32(t, spec), "qwen3moe.expert_used_count", uint32(1))
	m, err := Open(path, ModelParams{Threads: 2})
	require.NoError(t, err)
	defer m.Close()
	rc := loadRefs(t, synthRefPath(synthMoEName(spec, false)+".ref.jsonl"))[1]
	s, err := m.NewSession(SessionParams{KVF32: true, NCtx: 128})
	require.NoError(t, err)
	defer s.Close()
	vocab := m.Info().VocabSize
	all := make([]float32, len(rc.Tokens)*vocab)
	require.NoError(t, s.PrefillAll(rc.Tokens, all))
	worst := 0.0
	for i := range rc.Tokens {
		worst = max(worst, worstLogProbDiff(all[i*vocab:(i+1)*vocab], rc.PromptLogits[i]))
	}
	t.Logf("top-1 routing: worst log-probability difference %.4f", worst)
	assert.Greater(t, worst, 0.05)
}

// TestQwen3MoeBadFiles: expert counts out of range and expert tensors of
// the wrong shape are ErrBadFile naming what is wrong, never a crash.
func TestQwen3MoeBadFiles(t *testing.T) {
	src := synthModel(t, "synth-qwen3moe-Q8_0.gguf")
	for _, c := range []struct {
		key  string
		v    any
		want string
	}{
		{"qwen3moe.expert_used_count", uint32(9), "expert_used_count"},
		{"qwen3moe.expert_used_count", uint32(0), "expert_used_count"},
		{"qwen3moe.expert_count", uint32(0), "expert_count"},
		{"qwen3moe.expert_count", uint32(1 << 20), "expert_count"},
		{"qwen3moe.expert_count", uint32(16), "ffn_gate_inp"},
		{"qwen3moe.expert_feed_forward_length", uint32(256), "ffn_gate_exps"},
	} {
		_, err := Open(withKey(t, src, c.key, c.v), ModelParams{Threads: 1})
		require.Error(t, err, "%s = %v", c.key, c.v)
		assert.True(t, errors.Is(err, ErrBadFile), "%s = %v: %v", c.key, c.v, err)
		assert.Contains(t, err.Error(), c.want)
	}
}

// TestSharedGate: the shared expert's output is added times sigmoid(w.x),
// including where w.x is 0 (llama.cpp's silu(s)/s is 0/0 there).
func TestSharedGate(t *testing.T) {
	w := []float32{0.5, -1, 2}
	for _, sigmoid := range []bool{false, true} {
		for _, x := range [][]float32{{1, 2, 3}, {2, 1, 0}, {-4, 0, 1}} {
			s := float64(w[0]*x[0] + w[1]*x[1] + w[2]*x[2])
			out := []float32{1, -2}
			sh := []float32{3, 5}
			sharedGate(out, sh, float32(s), sigmoid)
			g := 1 / (1 + math.Exp(-s))
			assert.InDelta(t, 1+3*g, float64(out[0]), 1e-6, "w.x = %v", s)
			assert.InDelta(t, -2+5*g, float64(out[1]), 1e-6, "w.x = %v", s)
		}
	}
}

// TestLlamaWithExperts: a llama file with expert_count is run as Mixtral
// (llama's Variant), its experts feed_forward_length wide; the dense
// llama files keep the dense block.
func TestLlamaWithExperts(t *testing.T) {
	m, err := Open(synthModel(t, "synth-mixtral-Q8_0.gguf"), ModelParams{Threads: 1})
	require.NoError(t, err)
	defer m.Close()
	assert.Equal(t, "llama", m.Info().Arch)
	assert.NotNil(t, m.fam.Tensor(arch.GateExps), "the MoE variant's tensors")
	assert.Nil(t, m.fam.Tensor(arch.Gate), "no dense FFN")
	assert.Equal(t, arch.MoEParams{Experts: 8, Used: 2, FF: 128, NormW: true, WScale: 1}, m.cfg.MoE)
	assert.True(t, m.plan.moe)

	fam, ok := arch.Lookup("llama")
	require.True(t, ok)
	assert.NotNil(t, fam.Tensor(arch.Gate), "the registered llama is dense")
	assert.Nil(t, fam.Variant(&arch.Params{}), "no experts: no variant")
}

// TestMoEThreadsAndChunks: a prompt longer than the fast mode's batch (so
// prefilled in chunks, experts taking many tokens at once) gives the same
// logits with 1 and 3 threads (the products split by rows, which changes
// no sum), and decoding its last tokens one by one matches.
func TestMoEThreadsAndChunks(t *testing.T) {
	path := synthModel(t, "synth-qwen2moe-Q8_0.gguf")
	var text string
	for range 12 {
		text += "Once upon a time there was a dog. "
	}
	logits := map[int][]float32{}
	var toks []int32
	for _, threads := range []int{1, 3} {
		m, err := Open(path, ModelParams{Threads: threads})
		require.NoError(t, err)
		toks, err = m.Tokenize(text, true, false)
		require.NoError(t, err)
		require.Greater(t, len(toks), maxBatch)
		vocab := m.Info().VocabSize
		s, err := m.NewSession(SessionParams{NCtx: 256})
		require.NoError(t, err)
		all := make([]float32, len(toks)*vocab)
		require.NoError(t, s.PrefillAll(toks, all))
		logits[threads] = all
		if threads == 3 {
			// The last 5 tokens again, decoded one at a time.
			n := len(toks) - 5
			require.NoError(t, s.Rewind(n))
			lg := make([]float32, vocab)
			for i := n; i < len(toks); i++ {
				require.NoError(t, s.Decode(toks[i], lg))
				assert.InDeltaSlice(t, all[i*vocab:(i+1)*vocab], lg, 2e-3, "position %d", i)
			}
		}
		s.Close()
		require.NoError(t, m.Close())
	}
	assert.Equal(t, logits[1], logits[3], "1 and 3 threads")
}

// TestSwiGLUOAI checks gpt-oss's clamped SwiGLU against its definition in
// float64, on both sides of the limit of 7 (the gate clamped above only,
// the up value on both sides).
func TestSwiGLUOAI(t *testing.T) {
	g := []float32{-20, -7.5, -1, 0, 0.5, 3, 6.99, 7, 7.01, 30}
	u := []float32{-30, -7.01, -2, 1, 0, 6.5, 7.5, -8, 2, 100}
	want := make([]float64, len(g))
	for i := range g {
		x := math.Min(float64(g[i]), 7)
		y := math.Max(math.Min(float64(u[i]), 7), -7)
		want[i] = x / (1 + math.Exp(-1.702*x)) * (y + 1)
	}
	swigluOAI(g, u)
	for i, w := range want {
		assert.InDelta(t, w, float64(g[i]), 1e-5*math.Max(1, math.Abs(w)), "value %d", i)
	}
}

// TestChooseExpertsWeightSoftmax: with WeightSoftmax the largest logits
// (negative ones too) are chosen, largest first, and weighted by the
// softmax of the chosen ones alone.
func TestChooseExpertsWeightSoftmax(t *testing.T) {
	logits := []float32{-3, 1.5, -0.5, 2, -1}
	sel, w := make([]int32, 3), make([]float32, 3)
	e := &arch.MoEParams{WeightSoftmax: true, WScale: 1}
	chooseExperts(logits, sel, w, e, kernels.Detect().SoftmaxRow)
	assert.Equal(t, []int32{3, 1, 2}, sel)
	d := math.Exp(2) + math.Exp(1.5) + math.Exp(-0.5)
	for j, l := range []float64{2, 1.5, -0.5} {
		assert.InDelta(t, math.Exp(l)/d, float64(w[j]), 1e-6)
	}
}
