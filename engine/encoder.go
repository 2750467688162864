package engine

import (
	"fmt"

	"github.com/moonlm/moonlm/engine/arch"
	"github.com/moonlm/moonlm/kernels"
)

// Encoders (the bert family) differ from the decoders in three places,
// all driven by their description: learned position and token-type
// embeddings with a LayerNorm before the first block (encoderEmbed),
// LayerNorm steps with biases (layerNorm), and attention over the whole
// sequence (Params.NonCausal, in headView), which is why a sequence is
// computed in one forward pass and the session's batch is its context.
// They have no output head; Embed pools their last hidden states.

// maxEncoderCtx bounds an encoder session's context, which is also its
// batch (every buffer holds that many tokens): the BERT family's models
// train on 512 to 8192 positions.
const maxEncoderCtx = 1 << 15

// checkEncoder checks the tensors an encoder needs beyond the declared
// shapes.
func (m *Model) checkEncoder() error {
	g := &m.glob
	if m.embd.Data == nil || g.vecs[arch.EmbdNorm] == nil || g.vecs[arch.EmbdNormB] == nil {
		return descriptionError(m.fam, "token_embd and token_embd_norm are required")
	}
	// Learned positions, where the family has them (nomic-bert rotates
	// Q and K instead).
	if m.fam.Tensor(arch.PosEmbd) != nil && g.mats[arch.PosEmbd].Data == nil {
		return descriptionError(m.fam, "position_embd is required")
	}
	if tt := &g.mats[arch.TokenTypes]; tt.Data != nil && tt.Rows < 1 {
		return fmt.Errorf("%w: token_types.weight has no rows", ErrBadFile)
	}
	return nil
}

// encoderEmbed adds to token t's embedding (in X) the type-0 embedding and
// position pos's (when the model has learned positions), and norms the
// sum, as llama.cpp's BERT input.
func (s *Session) encoderEmbed(t, pos int) {
	m := s.m
	x, row := s.tok(arch.X, t), s.tok(arch.XN, t)
	if tt := &m.glob.mats[arch.TokenTypes]; tt.Data != nil {
		kernels.DequantizeRow(tt.Type, tt.Row(0), row)
		kernels.Add(x, x, row)
	}
	if pe := &m.glob.mats[arch.PosEmbd]; pe.Data != nil {
		kernels.DequantizeRow(pe.Type, pe.Row(pos), row)
		kernels.Add(x, row, x)
	}
	layerNorm(x, x, m.glob.vecs[arch.EmbdNorm], m.glob.vecs[arch.EmbdNormB], s.c.Eps)
}
