package engine

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/moonlm/moonlm/internal/shareddata"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// refDist is one position's reference distribution: the log-sum-exp of all
// logits and the ten highest [token, logit] pairs.
type refDist struct {
	LSE float64      `json:"lse"`
	Top [][2]float64 `json:"top"`
}

// refCase is one prompt of a llama.cpp reference file.
type refCase struct {
	Prompt       string    `json:"prompt"`
	Tokens       []int32   `json:"tokens"`
	PromptLogits []refDist `json:"prompt_logits"`
	Greedy       []int32   `json:"greedy"`
	GreedyText   string    `json:"greedy_text"`
	GreedyLogits []refDist `json:"greedy_logits"`
}

func loadRefs(t *testing.T, path string) []refCase {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	var out []refCase
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<26)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		var c refCase
		require.NoError(t, json.Unmarshal([]byte(line), &c), "parse %s", path)
		out = append(out, c)
	}
	require.NoError(t, sc.Err())
	require.NotEmpty(t, out)
	return out
}

// nearTie is the README's rule: where the two best reference logits are
// within gap (0.01), either token is a correct greedy choice.
func (d refDist) nearTie(gap float64) bool {
	return len(d.Top) > 1 && d.Top[0][1]-d.Top[1][1] <= gap
}

func logSumExp(x []float32) float64 {
	mx := math.Inf(-1)
	for _, v := range x {
		mx = math.Max(mx, float64(v))
	}
	var s float64
	for _, v := range x {
		s += math.Exp(float64(v) - mx)
	}
	return mx + math.Log(s)
}

func argmax(x []float32) int32 {
	best := 0
	for i, v := range x {
		if v > x[best] {
			best = i
		}
	}
	return int32(best)
}

// checkDist compares our logits at one position with the reference:
// log-probabilities of the reference's top tokens within tol, and the same
// top-1 unless the reference has a near-tie there. It returns the number
// of failures (reported through t).
func checkDist(t *testing.T, where string, logits []float32, ref refDist, tol, gap float64) bool {
	ok, _ := checkDistWorst(t, where, logits, ref, tol, gap)
	return ok
}

// checkDistWorst is checkDist also returning the worst log-probability
// difference.
func checkDistWorst(t *testing.T, where string, logits []float32, ref refDist, tol, gap float64) (bool, float64) {
	t.Helper()
	lse := logSumExp(logits)
	ok := true
	worst := 0.0
	for _, p := range ref.Top {
		tok := int(p[0])
		ours := float64(logits[tok]) - lse
		want := p[1] - ref.LSE
		worst = math.Max(worst, math.Abs(ours-want))
	}
	if worst > tol {
		t.Errorf("%s: log-probability differs by %.5f (tolerance %g)", where, worst, tol)
		ok = false
	}
	if !ref.nearTie(gap) {
		if got := argmax(logits); got != int32(ref.Top[0][0]) {
			t.Errorf("%s: top-1 is %d, reference %d (gap %.4f)", where, got, int32(ref.Top[0][0]), ref.Top[0][1]-ref.Top[1][1])
			ok = false
		}
	}
	return ok, worst
}

// runRefs checks a model against a reference file with the given cache.
// Prompt positions come from PrefillAll (the batched path), the greedy path
// from Decode fed with the reference's tokens; our own greedy choice must
// equal the reference's until the first near-tie.
func runRefs(t *testing.T, model, refs string, kvf32 bool, tol, gap float64, prompts []string) {
	runRefsWith(t, model, refs, kvf32, tol, gap, prompts, nil, nil)
}

// runRefsWith is runRefs with hooks to prepare the model and each session.
func runRefsWith(t *testing.T, model, refs string, kvf32 bool, tol, gap float64, prompts []string,
	prepModel func(*Model), prepSession func(*Session)) {
	runRefFiles(t, refOptions{
		model: shareddata.Path(t, model), refs: shareddata.Path(t, refs), kvf32: kvf32,
		tol: tol, gap: gap, prompts: prompts, prepModel: prepModel, prepSession: prepSession,
	})
}

// refOptions configure runRefFiles.
type refOptions struct {
	model, refs  string // file paths
	kvf32        bool
	tol, gap     float64
	prompts      []string // expected prompts, or nil
	parseSpecial bool     // tokenize prompts with special tokens parsed
	prepModel    func(*Model)
	prepSession  func(*Session)
	numerics     Numerics // the numerics mode Open takes
	cases        int      // check only the first cases reference cases (0: all)
	// diffs, when set, receives the worst log-probability difference of
	// every position checked (prompt, then greedy), for distribution checks.
	diffs *[]float64
	// tolAt, when set, is the tolerance at prompt position i of case ci
	// (greedy positions use tol).
	tolAt func(ci, i int) float64
	// nCtx is the sessions' context (0: 512).
	nCtx int
	// lastPrompt, when set, checks only the last lastPrompt prompt
	// positions (the others are computed without their logits), and
	// maxGreedy only the first maxGreedy greedy positions: a long prompt
	// through a large vocabulary then costs its forward passes, not a
	// vocabulary product per position.
	lastPrompt, maxGreedy int
	// batch, when set, prefills the prompt in calls of at most batch
	// tokens (the reference's llama_decode calls); not with lastPrompt.
	batch int
}

// check runs checkDistWorst and records the difference.
func (o *refOptions) check(t *testing.T, where string, logits []float32, ref refDist, tol float64) bool {
	t.Helper()
	ok, worst := checkDistWorst(t, where, logits, ref, tol, o.gap)
	if o.diffs != nil {
		*o.diffs = append(*o.diffs, worst)
	}
	return ok
}

func runRefFiles(t *testing.T, o refOptions) {
	kvf32, tol, gap, prompts, prepSession := o.kvf32, o.tol, o.gap, o.prompts, o.prepSession
	m, err := Open(o.model, ModelParams{Threads: 2, Numerics: o.numerics, Kernels: testKernels(t)})
	require.NoError(t, err)
	defer m.Close()
	if m.Numerics() == NumericsFast {
		// Decode as llama.cpp's does (see ggmlDecodeOrder); the llama.cpp
		// modes do so on their own.
		m.ggmlDecodeOrder = true
	}
	if o.prepModel != nil {
		o.prepModel(m)
	}
	cases := loadRefs(t, o.refs)
	if prompts != nil {
		require.Len(t, prompts, len(cases), "prompts file vs reference")
	}
	vocab := m.Info().VocabSize
	for ci, rc := range cases {
		if o.cases > 0 && ci >= o.cases {
			break
		}
		if prompts != nil {
			assert.Equal(t, prompts[ci], rc.Prompt, "case %d prompt", ci)
		}
		toks, err := m.Tokenize(rc.Prompt, true, o.parseSpecial)
		require.NoError(t, err)
		if !assert.Equal(t, rc.Tokens, toks, "case %d %q: prompt tokens", ci, rc.Prompt) {
			continue
		}
		nCtx := 512
		if o.nCtx > 0 {
			nCtx = o.nCtx
		}
		s, err := m.NewSession(SessionParams{KVF32: kvf32, NCtx: nCtx})
		require.NoError(t, err)
		if prepSession != nil {
			prepSession(s)
		}
		from := 0
		if o.lastPrompt > 0 {
			from = max(0, len(toks)-o.lastPrompt)
		}
		all := make([]float32, (len(toks)-from)*vocab)
		if o.batch > 0 {
			require.Zero(t, from, "batch with lastPrompt")
			for done := 0; done < len(toks); done += o.batch {
				end := min(done+o.batch, len(toks))
				require.NoError(t, s.PrefillFrom(toks[done:end], 0, all[done*vocab:end*vocab]))
			}
		} else {
			require.NoError(t, s.PrefillFrom(toks, from, all))
		}
		require.Len(t, rc.PromptLogits, len(toks))
		fails := 0
		for i := from; i < len(toks); i++ {
			ptol := tol
			if o.tolAt != nil {
				ptol = o.tolAt(ci, i)
			}
			if !o.check(t, caseWhere(ci, rc.Prompt, "prompt position", i), all[(i-from)*vocab:(i-from+1)*vocab], rc.PromptLogits[i], ptol) {
				fails++
			}
		}
		logits := append([]float32(nil), all[(len(toks)-1-from)*vocab:]...)
		dist := rc.PromptLogits[len(toks)-1]
		tied := false
		for gi, want := range rc.Greedy {
			tied = tied || dist.nearTie(gap)
			if !tied {
				if got := argmax(logits); got != want {
					t.Errorf("%s: greedy token %d, reference %d", caseWhere(ci, rc.Prompt, "greedy step", gi), got, want)
					fails++
					break
				}
			}
			if gi >= len(rc.GreedyLogits) || s.Pos() >= s.NCtx() || (o.maxGreedy > 0 && gi >= o.maxGreedy) {
				break
			}
			require.NoError(t, s.Decode(want, logits))
			dist = rc.GreedyLogits[gi]
			if !o.check(t, caseWhere(ci, rc.Prompt, "greedy position", gi), logits, dist, tol) {
				fails++
			}
			if fails > 5 {
				break
			}
		}
		s.Close()
	}
}

func caseWhere(ci int, prompt, what string, i int) string {
	if len(prompt) > 24 {
		prompt = prompt[:24] + "..."
	}
	return fmt.Sprintf("case %d %q: %s %d", ci, prompt, what, i)
}

func TestStories260KReferenceF16(t *testing.T) {
	runRefs(t, "models/stories260K.gguf", "reference/stories260K.ref.jsonl", false, 0.02, 0.01, nil)
}

func TestStories260KReferenceF32(t *testing.T) {
	runRefs(t, "models/stories260K.gguf", "reference/stories260K.kvf32.ref.jsonl", true, 2e-3, 0.01, nil)
}

func TestTinyRandomLlamaReferenceF16(t *testing.T) {
	runRefs(t, "models/tiny-random-llama.gguf", "reference/tiny-random-llama.ref.jsonl", false, 0.02, 0.01, nil)
}

func TestTinyRandomLlamaReferenceF32(t *testing.T) {
	runRefs(t, "models/tiny-random-llama.gguf", "reference/tiny-random-llama.kvf32.ref.jsonl", true, 2e-3, 0.01, nil)
}

func synthPrompts(t *testing.T) []string {
	return readPrompts(t, shareddata.Path(t, "synth/synth.prompts.txt"))
}

// readPrompts reads a prompts file: one a line, \n standing for a newline.
func readPrompts(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	for i, l := range lines {
		lines[i] = strings.ReplaceAll(l, `\n`, "\n")
	}
	return lines
}

// TestSynthReference checks the four architectures against ik_llama.cpp
// with the default (fast) kernels.
//
// The f32 models meet the parity tolerance of 0.02 at every position, which
// checks each architecture's wiring. The quantized ones are held to 0.5,
// with near-ties widened to match: ik quantizes activations its own way
// (bf16 block scales) and these random-weight models amplify such
// arithmetic noise to 0.05-0.35 in log-probability; a wrong dequantization
// or tensor wiring is still far outside it. TestSynthReferenceIk holds every
// file to the parity rules in the ik numerics mode, where the quantized
// ones are exact.
func TestSynthReference(t *testing.T) {
	for _, arch := range []string{"llama", "qwen2", "qwen3", "gemma3"} {
		for _, q := range []string{"f32", "Q8_0", "Q4_K_M"} {
			name := "synth-" + arch + "-" + q
			tol, gap := 0.02, 0.01
			if q != "f32" {
				tol, gap = 0.5, 0.5
			}
			t.Run(name, func(t *testing.T) {
				runRefs(t, "synth/"+name+".gguf", "synth/"+name+".ref.jsonl", false, tol, gap, synthPrompts(t))
			})
		}
	}
}

// TestSynthReferenceIk runs the synthetic models in the ik numerics mode
// (NumericsIk: ik_llama.cpp's activation quantization, product order, fused
// RMS norm, GELU, RoPE and flash attention) against the shared references,
// which ik_llama.cpp made, with the parity rules: prompt tokens identical,
// log-probabilities of the reference's top 10 within 0.02, top-1 where the
// top-2 gap exceeds 0.01, the greedy continuation up to the first near-tie.
// Beyond the rules it asserts what the mode achieves: the quantized files
// (Q8_0, Q4_K_M) equal the references at every prompt and greedy position
// (measured 0.0000; 1e-4 leaves room for the float64 log-sum-exp), the f32
// ones, whose f32 products still sum in our order, within 2e-3 (measured
// 0.0006).
func TestSynthReferenceIk(t *testing.T) {
	runSynthIk(t, synthPrompts(t), func(name string) string { return shareddata.Path(t, "synth/"+name+".ref.jsonl") }, 0)
}

// runSynthIk runs the shared synthetic models in the ik numerics mode on
// prompts against the references refs names (prefilled in calls of at most
// batch tokens; 0: one), with the parity rules and the bounds of
// TestSynthReferenceIk.
func runSynthIk(t *testing.T, prompts []string, refs func(name string) string, batch int) {
	for _, arch := range []string{"llama", "qwen2", "qwen3", "gemma3"} {
		for _, q := range []string{"f32", "Q8_0", "Q4_K_M"} {
			name := "synth-" + arch + "-" + q
			t.Run(name, func(t *testing.T) {
				var diffs []float64
				runRefFiles(t, refOptions{
					model: shareddata.Path(t, "synth/"+name+".gguf"), refs: refs(name),
					tol: 0.02, gap: 0.01, prompts: prompts, diffs: &diffs, numerics: NumericsIk, batch: batch,
				})
				require.NotEmpty(t, diffs)
				worst := slices.Max(diffs)
				bound := 1e-4
				if q == "f32" {
					bound = 2e-3
				}
				t.Logf("%d positions, worst log-probability difference %.5f", len(diffs), worst)
				assert.LessOrEqual(t, worst, bound, "worst log-probability difference in the ik numerics mode")
			})
		}
	}
}

// TestSynthReferenceIkHeldOut runs the ik numerics mode on prompts that
// were not used while the mode was written (testdata/synth/
// ik-heldout.prompts.txt, 16 to 45 tokens), against references
// ik_llama.cpp made with its defaults (flash attention, F16 KV cache, fused
// ops; n_ctx 512, 24 greedy tokens), the prompt in llama_decode calls of up
// to 31 tokens as the mode takes them (a bigger batch is refused:
// TestIkRefusesBigBatch): the same parity rules and bounds as
// TestSynthReferenceIk, so a mode that only fits the development prompts
// fails here (measured: the quantized files exact, the f32 ones within
// 0.0011).
func TestSynthReferenceIkHeldOut(t *testing.T) {
	prompts := readPrompts(t, synthRefPath("ik-heldout.prompts.txt"))
	runSynthIk(t, prompts, func(name string) string { return synthRefPath(name + ".ik-heldout.ref.jsonl") }, 31)
}

func TestStories260KGolden(t *testing.T) {
	m, err := Open(shareddata.Path(t, "models/stories260K.gguf"), ModelParams{Kernels: testKernels(t)})
	require.NoError(t, err)
	defer m.Close()
	golden, err := os.ReadFile(shareddata.Path(t, "models/stories260K.golden.txt"))
	require.NoError(t, err)
	s, err := m.NewSession(SessionParams{})
	require.NoError(t, err)
	defer s.Close()
	logits := make([]float32, m.Info().VocabSize)
	require.NoError(t, s.Prefill([]int32{m.Info().BOS}, logits))
	var ids []int32
	for len(ids) < 400 {
		tok := argmax(logits)
		if m.IsEOG(tok) {
			break
		}
		ids = append(ids, tok)
		require.NoError(t, s.Decode(tok, logits))
	}
	text := strings.TrimPrefix(m.Detokenize(ids), " ")
	want := strings.TrimSpace(string(golden))
	n := min(len(text), len(want))
	require.Greater(t, n, 200, "generated %q", text)
	assert.Equal(t, want[:n], text[:n])
}

// worstLogProbDiff is the largest log-probability difference over the
// reference's top tokens at one position.
func worstLogProbDiff(logits []float32, ref refDist) float64 {
	lse := logSumExp(logits)
	worst := 0.0
	for _, p := range ref.Top {
		d := math.Abs((float64(logits[int(p[0])]) - lse) - (p[1] - ref.LSE))
		worst = max(worst, d)
	}
	return worst
}
