package arch

import (
	"fmt"
	"math"
)

// gemma4 is Gemma 4 (text), its small "E2B"/"E4B" models included: Gemma
// 3's block with layers of two shapes and a few additions.
//
//   - Sliding-window and global layers, listed per layer
//     (attention.sliding_window_pattern, an array of booleans), with their
//     own head sizes (attention.key_length_swa for the sliding ones,
//     attention.key_length for the global ones), KV head counts (a
//     per-layer head_count_kv array), RoPE dimensions
//     (rope.dimension_count_swa) and bases (rope.freq_base_swa). The
//     global layers rotate with rope_freqs' divisors (the converter's
//     "proportional" RoPE: a huge divisor leaves a pair unrotated).
//   - Q and K normed per head with weights, V with a plain RMS norm; an
//     absent attn_v is attn_k; no query or score scale.
//   - KV sharing: the last attention.shared_kv_layers layers compute no
//     keys or values and attend over the cache of the last layer of their
//     kind before them.
//   - Per-layer inputs (embedding_length_per_layer_input > 0): each token
//     gets, per layer, its row of per_layer_token_embd plus a projection
//     of its embedding; after the FFN each block gates that input by its
//     state, projects it back and adds it. Each block's output may be
//     scaled by layer_output_scale.
//   - Feed-forward widths per layer (the "double-wide" MLP of the shared
//     layers) and final logit soft-capping.
//
// This follows llama.cpp (October 2026). ik_llama.cpp (August 2026) builds
// the same graph with the same KV sharing but differs in three places:
// without final_logit_softcapping it caps at 30 (llama.cpp: no cap); it
// norms the per-layer projection without the 1/sqrt(dim) scale and with an
// epsilon dim times larger (the same function, rounded otherwise); and it
// applies each layer's output scale at the start of the next. The ik
// numerics mode refuses gemma4.
//
// The mixture-of-experts models (26B-A4B) are not supported. The
// built-in chat format named for a file without a usable template is
// "gemma", Gemma 2 and 3's (<start_of_turn>), the nearest there is: Gemma
// 4's own (<|turn>) comes with the published files' templates, which the
// template interpreter renders.
var gemma4 = Family{
	Name:        "gemma4",
	ChatFormat:  "gemma",
	LayerShapes: true,
	Hparams:     gemma4Hparams,
	Variant: func(p *Params) *Family {
		if p.PerLayerDim == 0 {
			return &gemma4NoPLE
		}
		return nil
	},
	Model: append(tiedHead(Tensor{Role: RopeFreqs, Name: "rope_freqs.weight", Cols: RotHalf}),
		Tensor{Role: PerLayerTokEmbd, Name: "per_layer_token_embd.weight", Cols: PLAll, Rows: Vocab, Lookup: true},
		Tensor{Role: PerLayerModelProj, Name: "per_layer_model_proj.weight", Cols: Dim, Rows: PLAll},
		Tensor{Role: PerLayerProjNorm, Name: "per_layer_proj_norm.weight", Cols: PLDim},
	),
	Layer: append(gemma4Layer(),
		Tensor{Role: PLGate, Name: "inp_gate.weight", Cols: Dim, Rows: PLDim},
		Tensor{Role: PLProj, Name: "proj.weight", Cols: PLDim, Rows: Dim},
		Tensor{Role: PLPostNorm, Name: "post_norm.weight", Cols: Dim},
	),
	Block: append(gemma4Block(),
		Project(X, Proj{W: PLGate, Out: P}),
		Act(P),
		PerLayer(P),
		Project(P, Proj{W: PLProj, Out: O}),
		Norm(PLPostNorm, O, O),
		Residual(O),
		Scale(X, LayerOutScale),
	),
}

// gemma4NoPLE is gemma4 without per-layer inputs (the 31B model); the
// registry's gemma4 picks it by its Variant.
var gemma4NoPLE = Family{
	Name:       "gemma4",
	ChatFormat: "gemma",
	Model:      tiedHead(Tensor{Role: RopeFreqs, Name: "rope_freqs.weight", Cols: RotHalf}),
	Layer:      gemma4Layer(),
	Block:      append(gemma4Block(), Scale(X, LayerOutScale)),
}

// gemma4Layer is the tensors of a block without per-layer inputs.
func gemma4Layer() []Tensor {
	return []Tensor{
		{Role: AttnNorm, Name: "attn_norm.weight", Cols: Dim},
		{Role: WQ, Name: "attn_q.weight", Cols: Dim, Rows: QDim},
		{Role: WK, Name: "attn_k.weight", Cols: Dim, Rows: KVDim, Optional: true, KV: true},
		{Role: WV, Name: "attn_v.weight", Cols: Dim, Rows: KVDim, Optional: true, TiedTo: WK, KV: true},
		{Role: QNorm, Name: "attn_q_norm.weight", Cols: HeadDim},
		{Role: KNorm, Name: "attn_k_norm.weight", Cols: HeadDim, KV: true},
		attnOut,
		{Role: PostAttnNorm, Name: "post_attention_norm.weight", Cols: Dim},
		{Role: LayerOutScale, Name: "layer_output_scale.weight", Cols: One, Optional: true},
		ffnNorm,
		{Role: Gate, Name: "ffn_gate.weight", Cols: Dim, Rows: FF},
		{Role: Up, Name: "ffn_up.weight", Cols: Dim, Rows: FF},
		{Role: Down, Name: "ffn_down.weight", Cols: FF, Rows: Dim},
		{Role: PostFFNNorm, Name: "post_ffw_norm.weight", Cols: Dim},
	}
}

// gemma4Block is the block up to the FFN's residual. A layer sharing
// another's KV cache runs it without the steps of its own keys and
// values.
func gemma4Block() []Step {
	return join([]Step{
		Norm(AttnNorm, X, XN),
		Project(XN, Proj{W: WQ, Out: Q}, Proj{W: WK, Out: K}, Proj{W: WV, Out: V}),
		HeadNorm(Q, QNorm),
		HeadNorm(K, KNorm),
		HeadNorm(V, NoRole),
		RoPE(),
		Attend(),
	}, postNormAttnOut(), postNormGLU())
}

func gemma4Hparams(m Meta, p *Params) error {
	if err := requireKey(m, "attention.layer_norm_rms_epsilon"); err != nil {
		return err
	}
	if err := refuseExperts(m); err != nil {
		return err
	}
	var err error
	p.Neox, p.Act = true, GELU
	p.EmbScale = float32(math.Sqrt(float64(p.Dim)))
	p.QScale, p.KQScale = 1, 1
	if p.SWAWindow, err = m.Uint("attention.sliding_window", 0, true); err != nil {
		return err
	}
	if p.RopeSWA, err = m.Float("rope.freq_base_swa", 10000); err != nil {
		return err
	}
	if p.FinalSoftcap, err = m.Float("final_logit_softcapping", 0); err != nil {
		return err
	}
	if x := float64(p.FinalSoftcap); x < 0 || math.IsNaN(x) || math.IsInf(x, 0) {
		return fmt.Errorf("%w: gemma4 final logit soft-capping of %v", ErrBadFile, p.FinalSoftcap)
	}
	if p.PerLayerDim, err = m.Uint("embedding_length_per_layer_input", 0, true); err != nil {
		return err
	}
	if p.PerLayerDim > 1<<16 {
		return fmt.Errorf("%w: %s.embedding_length_per_layer_input = %d", ErrBadFile, m.Arch, p.PerLayerDim)
	}
	headSWA, err := m.Uint("attention.key_length_swa", 0, true)
	if err != nil {
		return err
	}
	if v, err := m.Uint("attention.value_length_swa", 0, true); err != nil {
		return err
	} else if v != headSWA {
		return fmt.Errorf("%w: gemma4 sliding-window key length %d differs from value length %d", ErrUnsupported, headSWA, v)
	}
	if p.RotSWA, err = m.Uint("rope.dimension_count_swa", p.Rot, false); err != nil {
		return err
	}
	return gemma4Shapes(m, p, headSWA)
}

// gemma4Shapes reads the per-layer arrays into p.Shapes and checks them.
func gemma4Shapes(m Meta, p *Params, headSWA int) error {
	n := p.Layers
	sliding, err := m.Bools("attention.sliding_window_pattern", n)
	if err != nil {
		return err
	}
	heads, err := m.Uints("attention.head_count", n, 0, true)
	if err != nil {
		return err
	}
	kvHeads, err := m.Uints("attention.head_count_kv", n, 0, false)
	if err != nil {
		return err
	}
	ff, err := m.Uints("feed_forward_length", n, 0, true)
	if err != nil {
		return err
	}
	shared, err := m.Uint("attention.shared_kv_layers", 0, false)
	if err != nil {
		return err
	}
	kvStart := n - shared
	if shared > 0 && (kvStart < 2 || !sliding[kvStart-2] || sliding[kvStart-1]) {
		// llama.cpp's reuse takes layer kvStart-2 for the sliding layers
		// and kvStart-1 for the global ones.
		return fmt.Errorf("%w: gemma4 sharing the KV cache of the last %d of %d layers needs a sliding and then a global layer before them", ErrUnsupported, shared, n)
	}
	p.Shapes = make([]LayerShape, n)
	for il := range p.Shapes {
		s := LayerShape{Heads: heads[il], KVHeads: kvHeads[il], HeadDim: p.HeadDim, Rot: p.Rot, FF: ff[il], Sliding: sliding[il], KVFrom: il}
		if s.KVHeads == 0 {
			s.KVHeads = s.Heads // llama.cpp's default: head_count_kv is head_count
		}
		if s.Sliding {
			s.HeadDim, s.Rot = headSWA, p.RotSWA
		}
		if il >= kvStart {
			s.KVFrom = kvStart - 1
			if s.Sliding {
				s.KVFrom = kvStart - 2
			}
		}
		switch {
		case s.Heads <= 0 || s.KVHeads <= 0 || s.FF <= 0 || s.HeadDim <= 0:
			return fmt.Errorf("%w: gemma4 layer %d: non-positive dimension (heads %d, kv heads %d, head size %d, ffn %d)", ErrBadFile, il, s.Heads, s.KVHeads, s.HeadDim, s.FF)
		case s.Heads%s.KVHeads != 0:
			return fmt.Errorf("%w: gemma4 layer %d: %d heads is not a multiple of %d kv heads", ErrBadFile, il, s.Heads, s.KVHeads)
		case s.Rot <= 0 || s.Rot > s.HeadDim || s.Rot%2 != 0:
			return fmt.Errorf("%w: gemma4 layer %d: rope dimensions %d for head size %d", ErrBadFile, il, s.Rot, s.HeadDim)
		}
		if src := p.Shapes[min(s.KVFrom, il)]; s.KVFrom != il && (src.KVHeads != s.KVHeads || src.HeadDim != s.HeadDim) {
			return fmt.Errorf("%w: gemma4 layer %d shares layer %d's KV cache of another shape", ErrUnsupported, il, s.KVFrom)
		}
		p.Shapes[il] = s
	}
	return nil
}
