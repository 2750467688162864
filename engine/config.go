package engine

import (
	"fmt"
	"math"

	"github.com/moonlm/moonlm/gguf"
)

// ffnAct is the FFN gate activation.
type ffnAct int

const (
	actSiLU ffnAct = iota // SwiGLU: llama, qwen2, qwen3
	actGELU               // GeGLU with the tanh GELU: gemma3
)

// config holds a model's hyperparameters, read from GGUF metadata with
// llama.cpp's defaults for missing optional keys.
type config struct {
	arch       string
	name       string
	nCtxTrain  int
	dim        int
	nLayer     int
	nHead      int
	nKV        int
	headDim    int // key length (n_embd_head_k)
	headDimV   int // value length (n_embd_head_v)
	ff         int
	nRot       int
	eps        float32
	ropeBase   float32
	ropeScale  float32 // linear position scale (1/factor), 1 = none
	neox       bool    // NeoX RoPE layout (pairs i, i+n/2)
	act        ffnAct
	qkNorm     bool    // per-head RMSNorm on Q and K (qwen3, gemma3)
	qkvBias    bool    // biases on Q, K, V (qwen2)
	postNorms  bool    // post-attention and post-FFN norms (gemma3)
	embScale   float32 // embeddings multiplied by this (gemma3: sqrt(dim)), 1 = none
	qScale     float32 // Q multiplied by this before attention (gemma3), 1 = none
	kqScale    float32 // attention scores multiplied by this in softmax
	swaWindow  int     // sliding window in positions; 0 = none
	swaPattern int     // every swaPattern-th layer is global; the others slide
	ropeSWA    float32 // RoPE base for sliding-window layers
}

// meta reads typed metadata keys of one architecture.
type meta struct {
	f    *gguf.File
	arch string
}

func (m meta) lookup(key string) (gguf.Value, bool) {
	return m.f.Lookup(m.arch + "." + key)
}

func (m meta) uint(key string, def int, required bool) (int, error) {
	v, ok := m.lookup(key)
	if !ok {
		if required {
			return 0, fmt.Errorf("%w: missing metadata key %s.%s", ErrBadFile, m.arch, key)
		}
		return def, nil
	}
	if a, err := v.Array(); err == nil {
		// Per-layer arrays: llama.cpp accepts them; we need one value for all layers.
		if a.Len() == 0 {
			return 0, fmt.Errorf("%w: metadata key %s.%s is an empty array", ErrBadFile, m.arch, key)
		}
		first, err := a.Uint64(0)
		if err != nil {
			return 0, fmt.Errorf("%w: metadata key %s.%s: %v", ErrBadFile, m.arch, key, err)
		}
		for i := 1; i < a.Len(); i++ {
			x, err := a.Uint64(i)
			if err != nil || x != first {
				return 0, fmt.Errorf("%w: metadata key %s.%s varies per layer", ErrUnsupported, m.arch, key)
			}
		}
		return int(first), nil
	}
	x, err := v.Uint64()
	if err != nil {
		return 0, fmt.Errorf("%w: metadata key %s.%s: %v", ErrBadFile, m.arch, key, err)
	}
	if x > math.MaxInt32 {
		return 0, fmt.Errorf("%w: metadata key %s.%s = %d is out of range", ErrBadFile, m.arch, key, x)
	}
	return int(x), nil
}

func (m meta) float(key string, def float32) (float32, error) {
	v, ok := m.lookup(key)
	if !ok {
		return def, nil
	}
	x, err := v.Float64()
	if err != nil {
		return 0, fmt.Errorf("%w: metadata key %s.%s: %v", ErrBadFile, m.arch, key, err)
	}
	return float32(x), nil
}

func (m meta) str(key, def string) string {
	v, ok := m.lookup(key)
	if !ok {
		return def
	}
	s, err := v.String()
	if err != nil {
		return def
	}
	return s
}

func generalString(f *gguf.File, key string) string {
	v, ok := f.Lookup(key)
	if !ok {
		return ""
	}
	s, _ := v.String()
	return s
}

// readConfig reads the hyperparameters of f. An architecture other than
// llama, qwen2, qwen3 and gemma3 is ErrUnsupported.
func readConfig(f *gguf.File) (config, error) {
	var c config
	c.arch = generalString(f, "general.architecture")
	c.name = generalString(f, "general.name")
	switch c.arch {
	case "llama", "qwen2", "qwen3", "gemma3":
	case "":
		return c, fmt.Errorf("%w: no general.architecture key", ErrBadFile)
	default:
		return c, fmt.Errorf("%w: architecture %q (supported: llama, qwen2, qwen3, gemma3)", ErrUnsupported, c.arch)
	}
	m := meta{f, c.arch}
	var err error
	if c.nCtxTrain, err = m.uint("context_length", 0, true); err != nil {
		return c, err
	}
	if c.dim, err = m.uint("embedding_length", 0, true); err != nil {
		return c, err
	}
	if c.nLayer, err = m.uint("block_count", 0, true); err != nil {
		return c, err
	}
	if c.ff, err = m.uint("feed_forward_length", 0, true); err != nil {
		return c, err
	}
	if c.nHead, err = m.uint("attention.head_count", 0, true); err != nil {
		return c, err
	}
	if c.nKV, err = m.uint("attention.head_count_kv", c.nHead, false); err != nil {
		return c, err
	}
	if c.dim <= 0 || c.nLayer <= 0 || c.ff <= 0 || c.nHead <= 0 || c.nKV <= 0 || c.nCtxTrain <= 0 {
		return c, fmt.Errorf("%w: non-positive dimension (embedding %d, layers %d, ffn %d, heads %d, kv heads %d, context %d)",
			ErrBadFile, c.dim, c.nLayer, c.ff, c.nHead, c.nKV, c.nCtxTrain)
	}
	if c.nHead%c.nKV != 0 {
		return c, fmt.Errorf("%w: %d heads is not a multiple of %d kv heads", ErrBadFile, c.nHead, c.nKV)
	}
	if c.headDim, err = m.uint("attention.key_length", c.dim/c.nHead, false); err != nil {
		return c, err
	}
	if c.headDimV, err = m.uint("attention.value_length", c.dim/c.nHead, false); err != nil {
		return c, err
	}
	if c.headDimV != c.headDim {
		return c, fmt.Errorf("%w: key length %d differs from value length %d", ErrUnsupported, c.headDim, c.headDimV)
	}
	if c.nRot, err = m.uint("rope.dimension_count", c.headDim, false); err != nil {
		return c, err
	}
	if c.headDim <= 0 || c.nRot <= 0 || c.nRot > c.headDim || c.nRot%2 != 0 {
		return c, fmt.Errorf("%w: rope dimensions %d for head size %d", ErrBadFile, c.nRot, c.headDim)
	}
	if c.eps, err = m.float("attention.layer_norm_rms_epsilon", 1e-5); err != nil {
		return c, err
	}
	if c.ropeBase, err = m.float("rope.freq_base", 10000); err != nil {
		return c, err
	}
	c.ropeScale = 1
	switch st := m.str("rope.scaling.type", "linear"); st {
	case "linear", "none":
		factor, err := m.float("rope.scaling.factor", 0)
		if err != nil {
			return c, err
		}
		if factor == 0 {
			if factor, err = m.float("rope.scale_linear", 0); err != nil {
				return c, err
			}
		}
		if factor != 0 && st == "linear" {
			c.ropeScale = 1 / factor
		}
	default:
		return c, fmt.Errorf("%w: rope scaling type %q", ErrUnsupported, st)
	}
	c.embScale, c.qScale = 1, 1
	c.kqScale = float32(1 / math.Sqrt(float64(c.headDim)))
	switch c.arch {
	case "llama":
		if c.nRot != c.headDim {
			return c, fmt.Errorf("%w: llama rope dimension %d differs from head size %d", ErrBadFile, c.nRot, c.headDim)
		}
	case "qwen2":
		c.neox, c.qkvBias = true, true
	case "qwen3":
		c.neox, c.qkNorm = true, true
	case "gemma3":
		c.neox, c.qkNorm, c.postNorms, c.act = true, true, true, actGELU
		c.embScale = float32(math.Sqrt(float64(c.dim)))
		// llama.cpp scales Q by 1/sqrt(key_length) (1/sqrt(dim/heads) for the
		// 62-layer 27B, whose query_pre_attn_scalar differs) and uses a KQ
		// scale of 1.
		if c.nLayer == 62 {
			c.qScale = float32(1 / math.Sqrt(float64(c.dim/c.nHead)))
		} else {
			c.qScale = float32(1 / math.Sqrt(float64(c.headDim)))
		}
		c.kqScale = 1
		if c.swaWindow, err = m.uint("attention.sliding_window", 0, true); err != nil {
			return c, err
		}
		c.swaPattern = 6
		c.ropeSWA = 10000
	}
	return c, nil
}

// sliding reports whether layer il uses sliding-window attention.
func (c *config) sliding(il int) bool {
	return c.swaWindow > 0 && c.swaPattern > 0 && il%c.swaPattern < c.swaPattern-1
}
