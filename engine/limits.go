package engine

import (
	"fmt"
	"math"
	"runtime/debug"
	"strconv"

	"github.com/moonlm/moonlm/engine/arch"
	"github.com/moonlm/moonlm/engine/pool"
	"github.com/moonlm/moonlm/gguf"
)

// MaxThreads bounds ModelParams.Threads and SessionParams.Threads: a pool
// allocates per-thread state, and a count from an uninitialised or hostile
// value must be an ErrInvalidArgument, not an allocation that kills the
// process.
const MaxThreads = pool.MaxThreads

// checkFileLimits checks the counts and numbers a model's metadata gives
// against what the file holds, before anything is allocated from them: a
// block count must be backed by that many blocks of tensors, a dimension by
// the shapes of the tensors it describes, and the numeric hyperparameters
// must be finite and positive. Every refusal is ErrBadFile naming the key.
func checkFileLimits(f *gguf.File, fam *arch.Family, c *config) error {
	key := func(k string) string { return c.Arch + "." + k }
	// Per-layer arrays give their first value unchecked: bound them all.
	for _, v := range []struct {
		k string
		n int
	}{
		{"context_length", c.CtxTrain}, {"embedding_length", c.Dim}, {"block_count", c.Layers},
		{"feed_forward_length", c.FF}, {"attention.head_count", c.Heads}, {"attention.head_count_kv", c.KVHeads},
		{"attention.key_length", c.HeadDim}, {"rope.dimension_count", c.Rot}, {"attention.sliding_window", c.SWAWindow},
		{"rope.scaling.original_context_length", c.CtxOrig},
	} {
		if v.n < 0 || v.n > math.MaxInt32 {
			return fmt.Errorf("%w: metadata key %s = %d is out of range", ErrBadFile, key(v.k), v.n)
		}
	}
	// Every block has the family's required tensors, so the file's tensor
	// count bounds the block count.
	// (A hybrid family's block has those of every layer and those of
	// its smaller kind of layer.)
	var byKind [3]int
	for _, t := range fam.Layer {
		if !t.Optional {
			byKind[t.Only]++
		}
	}
	required := byKind[arch.AllLayers] + min(byKind[arch.AttnLayers], byKind[arch.RecurrentLayers])
	nTensors := len(f.Tensors())
	if c.Layers <= 0 || c.Layers > nTensors/max(required, 1) {
		return fmt.Errorf("%w: metadata key %s = %d, but the file holds %d tensors (a block has at least %d)",
			ErrBadFile, key("block_count"), c.Layers, nTensors, required)
	}
	if len(fam.Layer) > 0 {
		if last := "blk." + strconv.Itoa(c.Layers-1) + "." + fam.Layer[0].Name; !fam.Layer[0].Optional && !hasTensor(f, last) {
			return fmt.Errorf("%w: metadata key %s = %d, but tensor %s is missing", ErrBadFile, key("block_count"), c.Layers, last)
		}
	}
	// Each dimension against the tensor that has it (axis 0 is the row
	// length, axis 1 the rows), in the first block, whose own shape it is.
	c0 := c.Layer(0)
	dims := []struct {
		what string
		want int64
		role arch.Role
		axis int
	}{
		{key("embedding_length"), int64(c.Dim), arch.TokenEmbd, 0},
		{key("feed_forward_length"), int64(c0.FF), arch.Up, 1},
		{key("attention.head_count") + " x " + key("attention.key_length"), int64(c0.Heads) * int64(c0.HeadDim), arch.WQ, 1},
		{key("attention.head_count_kv") + " x " + key("attention.key_length"), int64(c0.KVHeads) * int64(c0.HeadDim), arch.WK, 1},
	}
	for _, d := range dims {
		name, ok := tensorName(fam, d.role)
		if !ok {
			continue
		}
		t, ok := f.Tensor(name)
		if !ok {
			continue // loadTensors names the missing tensor
		}
		if d.axis >= len(t.Shape) || t.Shape[d.axis] != d.want {
			return fmt.Errorf("%w: metadata %s = %d, but tensor %s has shape %v", ErrBadFile, d.what, d.want, name, t.Shape)
		}
	}
	if err := checkVocabLimits(f); err != nil {
		return err
	}
	positive := func(x float32) bool { return x > 0 && !math.IsInf(float64(x), 0) } // false for NaN
	switch {
	case !positive(c.Eps):
		epsKey := "attention.layer_norm_rms_epsilon"
		if c.LayerNorm {
			epsKey = "attention.layer_norm_epsilon"
		}
		return fmt.Errorf("%w: metadata key %s = %v; want a finite epsilon > 0", ErrBadFile, key(epsKey), c.Eps)
	case !positive(c.RopeBase):
		return fmt.Errorf("%w: metadata key %s = %v; want a finite base > 0", ErrBadFile, key("rope.freq_base"), c.RopeBase)
	case !positive(c.RopeScale):
		return fmt.Errorf("%w: metadata key %s (or %s) gives a position scale of %v; want a finite factor > 0",
			ErrBadFile, key("rope.scaling.factor"), key("rope.scale_linear"), c.RopeScale)
	case c.AttnSoftcap != 0 && !positive(c.AttnSoftcap), c.FinalSoftcap != 0 && !positive(c.FinalSoftcap):
		return fmt.Errorf("%w: soft-capping (attention %v, logits %v) from %s and %s; want finite values > 0",
			ErrBadFile, c.AttnSoftcap, c.FinalSoftcap, key("attn_logit_softcapping"), key("final_logit_softcapping"))
	case !positive(c.RopeScaleSWA):
		return fmt.Errorf("%w: sliding-window RoPE scale %v; want a finite scale > 0", ErrBadFile, c.RopeScaleSWA)
	case c.YarnExt != 0 && (!positive(c.YarnBetaFast) || !positive(c.YarnBetaSlow) || c.CtxOrig <= 0 || math.IsNaN(float64(c.YarnLogMul)) || math.IsInf(float64(c.YarnLogMul), 0)):
		return fmt.Errorf("%w: YaRN parameters (beta fast %v, slow %v, original context %d, log multiplier %v) from %s; want finite values > 0",
			ErrBadFile, c.YarnBetaFast, c.YarnBetaSlow, c.CtxOrig, c.YarnLogMul, key("rope.scaling.*"))
	case c.AttnTempScale != 0 && (math.IsNaN(float64(c.AttnTempScale)) || math.IsInf(float64(c.AttnTempScale), 0) || c.AttnTempFloor <= 0):
		return fmt.Errorf("%w: metadata key %s = %v with an original context of %d", ErrBadFile, key("attention.temperature_scale"), c.AttnTempScale, c.AttnTempFloor)
	case !positive(c.AttnFactor), !positive(c.AttnFactorSWA):
		return fmt.Errorf("%w: metadata key %s = %v; want a finite factor > 0", ErrBadFile, key("rope.scaling.attn_factor"), c.AttnFactor)
	case !positive(c.EmbScale), !positive(c.QScale), !positive(c.KQScale):
		return fmt.Errorf("%w: attention scales (embedding %v, query %v, scores %v) from %s and %s are not finite",
			ErrBadFile, c.EmbScale, c.QScale, c.KQScale, key("embedding_length"), key("attention.key_length"))
	}
	return nil
}

// checkVocabLimits bounds the vocabulary before the tokenizer is built
// from it (building costs tens of bytes per token): every token needs a row
// of token_embd.weight, and the per-token arrays have one entry per token.
func checkVocabLimits(f *gguf.File) error {
	n := arrayLen(f, "tokenizer.ggml.tokens")
	if n < 0 {
		return nil // the tokenizer reports a missing or malformed vocabulary
	}
	if te, ok := f.Tensor("token_embd.weight"); ok && len(te.Shape) == 2 && int64(n) > te.Shape[1] {
		return fmt.Errorf("%w: metadata key tokenizer.ggml.tokens has %d tokens, but token_embd.weight has %d rows",
			ErrBadFile, n, te.Shape[1])
	}
	for _, k := range []string{"tokenizer.ggml.scores", "tokenizer.ggml.token_type"} {
		if m := arrayLen(f, k); m >= 0 && m != n {
			return fmt.Errorf("%w: metadata key %s has %d entries for %d tokens", ErrBadFile, k, m, n)
		}
	}
	return nil
}

// arrayLen is the length of the array at key, or -1 if there is none.
func arrayLen(f *gguf.File, key string) int {
	v, ok := f.Lookup(key)
	if !ok {
		return -1
	}
	a, err := v.Array()
	if err != nil {
		return -1
	}
	return a.Len()
}

// tensorName is the file name of role's tensor in fam (block 0's for a
// block tensor).
func tensorName(fam *arch.Family, r arch.Role) (string, bool) {
	for _, t := range fam.Model {
		if t.Role == r {
			return t.Name, true
		}
	}
	for _, t := range fam.Layer {
		if t.Role == r && t.Name != "" && t.Only == arch.AllLayers && !fusedName(fam, t.Name) {
			return "blk.0." + t.Name, true
		}
	}
	return "", false
}

// fusedName reports whether name is a fused block tensor's too: a part
// that older conversions write unfused under the fused tensor's name,
// whose shape tells which one a file has (so it witnesses no dimension).
func fusedName(fam *arch.Family, name string) bool {
	for _, t := range fam.Layer {
		if len(t.Fused) > 0 && t.Name == name {
			return true
		}
	}
	return false
}

func hasTensor(f *gguf.File, name string) bool {
	_, ok := f.Tensor(name)
	return ok
}

// checkThreads refuses a thread count beyond MaxThreads (what the caller
// names in the message).
func checkThreads(what string, n int) error {
	if n < 0 || n > MaxThreads {
		return fmt.Errorf("%w: %s is %d; want 0 (all cores) to %d", ErrInvalidArgument, what, n, MaxThreads)
	}
	return nil
}

// parseMapped parses a file mapping with memory faults turned into errors:
// a file truncated after it was mapped raises SIGBUS on the pages past its
// new end, which must be ErrIO rather than the end of the process.
func parseMapped(data []byte) (f *gguf.File, err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			f, err = nil, panicError("parsing", r)
		}
	}()
	f, err = gguf.Parse(data)
	if err != nil {
		return nil, classifyGGUF(err)
	}
	return f, nil
}
