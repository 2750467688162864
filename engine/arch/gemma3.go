package arch

import "math"

// gemma3 is Gemma 3 (text): GeGLU, embeddings scaled by sqrt(dim), per-head
// Q/K norms, norms after attention and after the FFN, and five
// sliding-window layers for every global one, with their own RoPE base.
var gemma3 = Family{
	Name:       "gemma3",
	ChatFormat: "gemma",
	Hparams: func(m Meta, p *Params) error {
		p.Neox, p.Act = true, GELU
		p.EmbScale = float32(math.Sqrt(float64(p.Dim)))
		// As llama.cpp: Q scaled by 1/sqrt(key_length), except for the
		// 27B model, whose query_pre_attn_scalar is dim/heads; scores
		// then take a scale of 1.
		if gemma3Sizes[p.Layers] == "27B" {
			p.QScale = float32(1 / math.Sqrt(float64(p.Dim/p.Heads)))
		} else {
			p.QScale = float32(1 / math.Sqrt(float64(p.HeadDim)))
		}
		p.KQScale = 1
		var err error
		if p.SWAWindow, err = m.Uint("attention.sliding_window", 0, true); err != nil {
			return err
		}
		p.SWAPattern = 6
		if p.RopeSWA, err = m.Float("rope.freq_base_swa", 10000); err != nil {
			return err
		}
		// Absent (0) in the published files; read as llama.cpp does.
		if p.FinalSoftcap, err = m.Float("final_logit_softcapping", 0); err != nil {
			return err
		}
		return nil
	},
	Model: tiedHead(),
	Layer: join(qkv(), qkNorm(), []Tensor{attnOut,
		{Role: PostAttnNorm, Name: "post_attention_norm.weight", Cols: Dim}},
		gluFFN(), []Tensor{ffnNorm,
			{Role: PostFFNNorm, Name: "post_ffw_norm.weight", Cols: Dim}}),
	Block: join([]Step{
		Norm(AttnNorm, X, XN),
		Project(XN, Proj{W: WQ, Out: Q}, Proj{W: WK, Out: K}, Proj{W: WV, Out: V}),
		HeadNorm(Q, QNorm),
		HeadNorm(K, KNorm),
		RoPE(),
		ScaleQ(),
		Attend(),
	}, postNormAttnOut(), postNormGLU()),
}

// gemma3Sizes names the published models by layer count, as llama.cpp
// does to pick the 27B's query scale.
var gemma3Sizes = map[int]string{18: "270M", 26: "1B", 34: "4B", 48: "12B", 62: "27B"}
